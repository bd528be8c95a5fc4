// Utilisation at a bandwidth, inverted: the inter-replica bandwidth a target utilisation needs,
// and utilisation along a grid of bandwidths (the sweep).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loco/sim/algorithm_spec.h"
#include "loco/sim/scenario.h"
#include "loco/sim/schedule_sim.h"

namespace loco::sim {

enum class TimingModel { kSchedule, kAnalytic };

// "schedule" or "analytic"; throws ConfigError otherwise.
TimingModel parse_timing_model(const std::string& name);
const char* timing_model_name(TimingModel model);

// Utilisation with the inter-replica link at `bandwidth_bps`.
Utilisation utilisation_at(Scenario scenario, const AlgorithmSpec& algorithm, TimingModel model, double bandwidth_bps);

// Utilisations bandwidth_for_utilisation computes at most: the two ends, then a bisection in log space of
// kMaxBandwidthBps / kMinBandwidthBps = 1e15 down to a ratio of 1 + 1e-6 (25 halvings of its logarithm).
inline constexpr int kReplaysPerTarget = 27;

// The smallest bandwidth (bits/s, relative precision 1e-6) at which utilisation reaches `target`
// (0 < target < 1); 0 when the inter-replica link is never used (for example one replica); nullopt
// when no bandwidth is enough (latency or the inner reduction already costs more).
std::optional<double> bandwidth_for_utilisation(const Scenario& scenario, const AlgorithmSpec& algorithm,
                                                TimingModel model, double target);

// `points` bandwidths spaced evenly in log scale from `low` to `high` (both included); at most
// kMaxSweepPoints, which a chart cannot tell apart already (a hundred million points took minutes and gigabytes).
inline constexpr int kMaxSweepPoints = 10000;
std::vector<double> log_spaced(double low, double high, int points);

}  // namespace loco::sim
