// The checks of a run's dist and comm sections (load_config.cpp calls them with the strategies' own,
// strategy_checks.h): the replicas and how the batch is shared, the rules that combine pseudo-gradients,
// a simulated adversary, what an elastic run needs, a churn schedule, the device the replicas share, and
// the links. ConfigError naming the key and the fix.
#pragma once

#include <string>

#include "loco/config/run_config.h"

namespace loco {

void check_dist_section(const RunConfig& config);
void check_comm_section(const RunConfig& config);

// An emulated link (comm.*, pipeline.*, `loco bench allreduce`'s options, named by `bandwidth_name` and
// `latency_name`) within what real links span: a stage's messages and a bench's rounds really wait their
// latency, so a latency of days would hold them that long; a bandwidth below 1 kbit/s would make an exchange
// last beyond what the emulated clock can count. One value, or one per rank of `ranks`.
void check_emulated_link(const std::string& bandwidth_name, const std::string& bandwidth_mbps,
                         const std::string& latency_name, const std::string& latency_ms, int ranks);

}  // namespace loco
