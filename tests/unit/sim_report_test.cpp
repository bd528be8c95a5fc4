// What `loco simulate` and `loco fit` print: tables, JSON and the sweep CSV, from the library (the
// CLI tests cover the binary itself).
#include <gtest/gtest.h>

#include "loco/sim/calibration_report.h"
#include "loco/sim/fit_report.h"
#include "loco/sim/simulate_report.h"

namespace loco::sim {
namespace {

SimulationRequest request() {
  SimulationRequest r;
  r.scenario.params = 1e9;
  r.scenario.layers = 24;
  r.scenario.step_time_s = 0.1;
  r.scenario.inter = {0, 0.5};  // half a second per collective: data parallel never reaches 90%
  r.scenario.intra = {400e9, 0};
  r.algorithms = parse_algorithms("dp,noloco", AlgorithmDefaults{}, 24);
  r.models = {TimingModel::kSchedule, TimingModel::kAnalytic};
  r.targets = {0.5, 0.9};
  r.bandwidth_bps = 10e9;
  return r;
}

TEST(SimReport, SimulationTableAndJson) {
  SimulationReport report = run_simulation(request());
  ASSERT_EQ(report.outcomes.size(), 4u);
  std::string table = format_simulation_table(report);
  EXPECT_NE(table.find("noloco(H=100) [analytic]"), std::string::npos) << table;
  EXPECT_NE(table.find("never"), std::string::npos) << table;
  EXPECT_NE(table.find("util@10G"), std::string::npos) << table;
  nlohmann::json json = simulation_json(report);
  EXPECT_EQ(json["bandwidth_gbps"].get<double>(), 10);
  EXPECT_TRUE(json["results"][0]["bandwidth_needed"][1]["bandwidth_gbps"].is_null());  // dp at 90%
  EXPECT_GT(json["results"][1]["bandwidth_needed"][1]["bandwidth_gbps"].get<double>(), 0);
  EXPECT_EQ(json["results"][3]["model"], "analytic");
}

TEST(SimReport, SweepCsvHasOneColumnPerCurve) {
  Sweep sweep = run_sweep(request(), 1e9, 100e9, 3);
  std::string csv = sweep_csv(sweep);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "bandwidth_gbps,\"dp [schedule]\",\"noloco(H=100) [schedule]\",\"dp [analytic]\","
            "\"noloco(H=100) [analytic]\"");
  EXPECT_NE(csv.find("\n10,"), std::string::npos) << csv;  // the middle of 1..100 in log scale
  for (const auto& curve : sweep.utilisation) {
    EXPECT_LE(curve[0], curve[1]);
    EXPECT_LE(curve[1], curve[2]);
  }
}

TEST(SimReport, CalibrationTableNamesEveryRow) {
  std::string table = format_calibration_table(run_calibration());
  for (const char* row : {"data parallel", "DiLoCo", "Streaming", "+ overlap", "+ overlap + FP4"}) {
    EXPECT_NE(table.find(row), std::string::npos) << row;
  }
  EXPECT_NE(table.find("Largest relative error"), std::string::npos);
}

TEST(SimReport, FitReportAndJson) {
  FitOptions options;
  options.predictions = {parse_prediction("10e9:8")};
  FitReport report =
      fit_scaling_laws(load_points_csv(std::string(LOCO_FIXTURE_DIR) + "/scaling_law_table.csv"), options);
  std::string text = format_fit_report(report);
  EXPECT_NE(text.find("A = 19.252  α = -0.09856  β = 0.01162"), std::string::npos) << text;
  EXPECT_NE(text.find("leave-one-out error"), std::string::npos) << text;
  EXPECT_NE(text.find("diloco M=8"), std::string::npos) << text;
  nlohmann::json json = fit_json(report);
  EXPECT_EQ(json["per_group"].size(), 5u);
  EXPECT_EQ(json["joint"]["residuals"].size(), 28u);
  EXPECT_TRUE(json["joint"]["leave_one_out_largest_n"].contains("mean_abs_relative_error"));
  EXPECT_TRUE(json["predictions"][0]["additive"].is_number());
}

}  // namespace
}  // namespace loco::sim
