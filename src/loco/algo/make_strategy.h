// Picks the strategy `dist.algorithm` names and builds it from the config (DESIGN.md §3 "Strategy").
#pragma once

#include <memory>

#include "loco/comm/group.h"
#include "loco/config/run_config.h"
#include "loco/train/sim_clock.h"
#include "loco/train/strategy.h"

namespace loco {

// What a strategy needs to know about the replica it serves.
struct ReplicaContext {
  comm::Group* group = nullptr;  // all replicas of the run; nullptr only for algorithm "none"
  SimClock* clock = nullptr;     // emulated wall clock of this replica (note "emulated-wall-clock")
  std::int64_t total_steps = 0;  // the run's last step (strategies sync there)
};

// ConfigError when the algorithm cannot run here (e.g. no group for M > 1).
std::unique_ptr<Strategy> make_strategy(const RunConfig& config, const ReplicaContext& context);

}  // namespace loco
