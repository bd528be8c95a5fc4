// Builds the strategy `dist.algorithm` names from the config (docs/design.md §3 "Strategy"): a
// StrategyFactory (train/strategy.h) for the trainer. Callers: cli/cmd_train.cpp, the tests' algorithm
// harness and bench/outer_step_bench.cpp.
#pragma once

#include <memory>

#include "loco/config/run_config.h"
#include "loco/train/strategy.h"

namespace loco {

// ConfigError when the algorithm cannot run here (e.g. no group for M > 1).
std::unique_ptr<Strategy> make_strategy(const RunConfig& config, const ReplicaContext& context);

}  // namespace loco
