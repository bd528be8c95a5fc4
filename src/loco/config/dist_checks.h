// The checks of a run's dist and comm sections (load_config.cpp calls them with the strategies' own,
// strategy_checks.h): the replicas and how the batch is shared, the rules that combine pseudo-gradients,
// a simulated adversary, what an elastic run needs, a churn schedule, the device the replicas share, and
// the links. ConfigError naming the key and the fix.
#pragma once

#include "loco/config/run_config.h"

namespace loco {

void check_dist_section(const RunConfig& config);
void check_comm_section(const RunConfig& config);

}  // namespace loco
