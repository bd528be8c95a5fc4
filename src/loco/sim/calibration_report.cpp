#include "loco/sim/calibration_report.h"

#include <fmt/format.h>

#include <cmath>

#include "loco/sim/bandwidth_search.h"
#include "loco/sim/simulate_report.h"
#include "loco/util/error.h"

namespace loco::sim {

std::vector<CalibrationResult> run_calibration() {
  const Scenario scenario = calibration_scenario();
  std::vector<CalibrationResult> results;
  for (const auto& row : calibration_rows()) {
    CalibrationResult r{row, {}, {}};
    for (std::size_t i = 0; i < kCalibrationTargets.size(); ++i) {
      auto bps = bandwidth_for_utilisation(scenario, row.algorithm, TimingModel::kSchedule, kCalibrationTargets[i]);
      LOCO_CHECK(bps && *bps > 0, "calibration cell {} of {} has no finite bandwidth", i, row.method);
      r.simulated_gbps[i] = *bps / 1e9;
      r.relative_error[i] = r.simulated_gbps[i] / row.published_gbps[i] - 1;
    }
    results.push_back(r);
  }
  return results;
}

double worst_relative_error(const std::vector<CalibrationResult>& results) {
  double worst = 0;
  for (const auto& r : results) {
    for (double e : r.relative_error) worst = std::max(worst, std::abs(e));
  }
  return worst;
}

std::string format_calibration_table(const std::vector<CalibrationResult>& results) {
  const Scenario s = calibration_scenario();
  std::string out = fmt::format(
      "Calibration: docs/algorithm-reference.md §4 (Streaming DiLoCo, 1B model, H = 100, 3-layer fragments).\n"
      "Scenario: {:.3g} exchanged values in {} layers, {:g} s per step, {} replicas, {:g} bits per "
      "value (FP4 row: {:g}).\n"
      "Cells: Gbit/s needed, loco (published, relative error).\n\n",
      s.params, s.layers, s.step_time_s, s.replicas, s.bits, results.back().row.algorithm.bits);
  out += fmt::format("{:<16}", "method");
  for (double t : kCalibrationTargets) out += fmt::format("  {:>22}", fmt::format("{:g}%", t * 100));
  out += "\n";
  for (const auto& r : results) {
    out += fmt::format("{:<16}", r.row.method);
    for (std::size_t i = 0; i < kCalibrationTargets.size(); ++i) {
      out += fmt::format("  {:>22}", fmt::format("{:.4g} ({:g}, {:+.0f}%)", r.simulated_gbps[i],
                                                 r.row.published_gbps[i], r.relative_error[i] * 100));
    }
    out += "\n";
  }
  out += fmt::format("\nLargest relative error: {:.1f}%\n", worst_relative_error(results) * 100);
  return out;
}

nlohmann::json calibration_json(const std::vector<CalibrationResult>& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json cells = nlohmann::json::array();
    for (std::size_t i = 0; i < kCalibrationTargets.size(); ++i) {
      cells.push_back({{"utilisation", kCalibrationTargets[i]},
                       {"published_gbps", r.row.published_gbps[i]},
                       {"simulated_gbps", r.simulated_gbps[i]},
                       {"relative_error", r.relative_error[i]}});
    }
    rows.push_back({{"method", r.row.method}, {"label", r.row.algorithm.label()}, {"cells", cells}});
  }
  return {{"scenario", scenario_json(calibration_scenario())},
          {"rows", rows},
          {"worst_relative_error", worst_relative_error(results)}};
}

}  // namespace loco::sim
