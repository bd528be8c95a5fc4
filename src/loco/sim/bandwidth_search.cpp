#include "loco/sim/bandwidth_search.h"

#include <cmath>

#include "loco/sim/analytic_model.h"
#include "loco/util/error.h"

namespace loco::sim {

TimingModel parse_timing_model(const std::string& name) {
  if (name == "schedule") return TimingModel::kSchedule;
  if (name == "analytic") return TimingModel::kAnalytic;
  throw ConfigError(
      fmt::format("unknown timing model '{}'; use schedule (the per-layer simulator) or "
                  "analytic (the closed-form model of docs/algorithm-reference.md §3).",
                  name));
}

const char* timing_model_name(TimingModel model) { return model == TimingModel::kSchedule ? "schedule" : "analytic"; }

Utilisation utilisation_at(Scenario scenario, const AlgorithmSpec& algorithm, TimingModel model, double bandwidth_bps) {
  scenario.inter.bandwidth_bps = bandwidth_bps;
  return model == TimingModel::kSchedule ? simulate_schedule(scenario, algorithm)
                                         : analytic_utilisation(scenario, algorithm);
}

std::optional<double> bandwidth_for_utilisation(const Scenario& scenario, const AlgorithmSpec& algorithm,
                                                TimingModel model, double target) {
  if (!(target > 0 && target < 1)) {
    throw ConfigError(
        fmt::format("a target utilisation must lie strictly between 0% and 100% (got "
                    "{}%).",
                    target * 100));
  }
  auto reaches = [&](double bps) { return utilisation_at(scenario, algorithm, model, bps).utilisation >= target; };
  if (!reaches(kMaxBandwidthBps)) return std::nullopt;
  if (reaches(kMinBandwidthBps)) return 0.0;  // the inter-replica link does not matter (one replica)
  // Utilisation never decreases with bandwidth: bisect in log space.
  double low = kMinBandwidthBps, high = kMaxBandwidthBps;
  while (high / low > 1 + 1e-6) {
    double mid = std::sqrt(low * high);
    (reaches(mid) ? high : low) = mid;
  }
  return high;
}

std::vector<double> log_spaced(double low, double high, int points) {
  if (!(low > 0 && high > low && points >= 2 && points <= kMaxSweepPoints)) {
    throw ConfigError(fmt::format("a sweep needs 0 < low < high and 2 to {} points (got {} to {} Gbit/s, {} points).",
                                  kMaxSweepPoints, low / 1e9, high / 1e9, points));
  }
  std::vector<double> grid(points);
  for (int i = 0; i < points; ++i) {
    grid[i] = low * std::pow(high / low, static_cast<double>(i) / (points - 1));
  }
  grid.back() = high;  // exactly: pow's rounding could step past the highest link the simulator models
  return grid;
}

}  // namespace loco::sim
