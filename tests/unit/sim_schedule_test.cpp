// The per-layer utilisation simulator and the analytic model: hand-computed schedules, special
// cases that must coincide, the bandwidth search, and the published calibration table.
#include <gtest/gtest.h>

#include <cmath>

#include "loco/sim/analytic_model.h"
#include "loco/sim/bandwidth_search.h"
#include "loco/sim/calibration_report.h"
#include "loco/sim/schedule_sim.h"

namespace loco::sim {
namespace {

// 4 layers, 0.4 s per step (forward 0.1 s, backward 0.3 s), 4e9 values of 1 bit between 2
// replicas of one worker: one layer's reduction moves 1e9 bits.
Scenario small_scenario(double bandwidth_bps) {
  Scenario s;
  s.params = 4e9;
  s.layers = 4;
  s.step_time_s = 0.4;
  s.forward_share = 0.25;
  s.workers = 2;
  s.replicas = 2;
  s.bits = 1;
  s.inter = {bandwidth_bps, 0};
  s.intra = {400e9, 0};
  return s;
}

AlgorithmSpec spec(const std::string& text, int layers = 4) {
  return parse_algorithm(text, AlgorithmDefaults{}, layers);
}

TEST(SimSchedule, DataParallelWhenTheLinkKeepsUpOnlyTheLastLayerIsExposed) {
  // 1e9 bits at 1e11 bit/s = 0.01 s per layer, less than a layer's backward (0.075 s): only the
  // first layer's reduction, issued at the very end of the backward pass, delays the next step.
  Utilisation u = simulate_schedule(small_scenario(1e11), spec("dp"));
  EXPECT_NEAR(u.utilisation, 0.4 / 0.41, 1e-12);
}

TEST(SimSchedule, DataParallelWhenTheLinkIsTheBottleneck) {
  // 0.1 s per layer: the first reduction starts after forward + one layer's backward (0.175 s),
  // four run back to back until 0.575 s, and the next forward waits for the last one.
  Utilisation u = simulate_schedule(small_scenario(1e10), spec("dp"));
  EXPECT_NEAR(u.utilisation, 0.4 / 0.575, 1e-12);
}

TEST(SimSchedule, DiLoCoHidesTheSyncBehindHSteps) {
  // H = 10: the sync costs what a data-parallel step costs, once every 10 steps.
  Utilisation u = simulate_schedule(small_scenario(1e10), spec("diloco:h=10"));
  EXPECT_NEAR(u.utilisation, 4.0 / (4.0 + 0.175), 1e-12);
}

TEST(SimSchedule, SpecialCasesCoincide) {
  for (double bandwidth : {3e8, 1e10, 2e11}) {
    Scenario s = small_scenario(bandwidth);
    // DiLoCo with H = 1 exchanges what data parallel exchanges, at the same points.
    EXPECT_DOUBLE_EQ(simulate_schedule(s, spec("diloco:h=1")).utilisation,
                     simulate_schedule(s, spec("dp")).utilisation);
    // Streaming with one fragment and no overlap is DiLoCo.
    EXPECT_DOUBLE_EQ(simulate_schedule(s, spec("streaming:h=20:fragments=1")).utilisation,
                     simulate_schedule(s, spec("diloco:h=20")).utilisation);
    // Overlap never hurts, fragments never hurt.
    EXPECT_GE(simulate_schedule(s, spec("streaming:h=20:fragments=4:tau=1")).utilisation,
              simulate_schedule(s, spec("streaming:h=20:fragments=4")).utilisation);
    EXPECT_GE(simulate_schedule(s, spec("streaming:h=20:fragments=4")).utilisation,
              simulate_schedule(s, spec("diloco:h=20")).utilisation - 1e-12);
  }
}

TEST(SimSchedule, OneReplicaNeverUsesTheInterReplicaLink) {
  Scenario s = small_scenario(1e3);
  s.replicas = 1;
  s.workers = 1;
  EXPECT_NEAR(simulate_schedule(s, spec("diloco")).utilisation, 1.0, 1e-12);
  EXPECT_EQ(bandwidth_for_utilisation(s, spec("diloco"), TimingModel::kSchedule, 0.99), 0.0);
}

TEST(SimSchedule, InnerReductionUsesTheIntraLink) {
  Scenario s = small_scenario(1e15);
  s.workers = 4;  // two workers per replica: 2·1e9·(1/2) bits per layer on the intra link
  s.intra = {1e10, 0};
  // Intra transfers of 0.1 s per layer, the same bottleneck as DataParallelWhenTheLinkIsTheBottleneck.
  EXPECT_NEAR(simulate_schedule(s, spec("diloco:h=1000")).utilisation, 0.4 / 0.575, 1e-3);
}

TEST(SimSchedule, NoLoCoSendsTwiceWhatARingSendsBetweenTwoReplicas) {
  Scenario s = small_scenario(0);
  auto diloco = bandwidth_for_utilisation(s, spec("diloco:h=10"), TimingModel::kSchedule, 0.9);
  auto noloco = bandwidth_for_utilisation(s, spec("noloco:h=10"), TimingModel::kSchedule, 0.9);
  ASSERT_TRUE(diloco && noloco);
  EXPECT_NEAR(*noloco / *diloco, 2.0, 1e-5);
}

TEST(SimBandwidthSearch, FindsTheSmallestSufficientBandwidth) {
  Scenario s = small_scenario(0);
  for (const char* text : {"dp", "diloco:h=10", "streaming:h=12:fragments=4:tau=1", "noloco:h=5"}) {
    for (double target : {0.5, 0.9, 0.99}) {
      auto bps = bandwidth_for_utilisation(s, spec(text), TimingModel::kSchedule, target);
      ASSERT_TRUE(bps.has_value()) << text;
      EXPECT_GE(utilisation_at(s, spec(text), TimingModel::kSchedule, *bps).utilisation, target) << text;
      EXPECT_LT(utilisation_at(s, spec(text), TimingModel::kSchedule, *bps * 0.9999).utilisation, target) << text;
    }
  }
}

TEST(SimBandwidthSearch, LatencyBoundTargetsAreNeverReached) {
  Scenario s = small_scenario(0);
  s.inter.latency_s = 0.4;  // every step waits at least 0.4 s: utilisation stays below 50%
  EXPECT_FALSE(bandwidth_for_utilisation(s, spec("dp"), TimingModel::kSchedule, 0.5).has_value());
  EXPECT_FALSE(bandwidth_for_utilisation(s, spec("dp"), TimingModel::kAnalytic, 0.5).has_value());
  EXPECT_TRUE(bandwidth_for_utilisation(s, spec("diloco:h=100"), TimingModel::kSchedule, 0.9).has_value());
}

TEST(SimAnalytic, MatchesTheClosedForm) {
  Scenario s = small_scenario(1e10);
  s.workers = 8;
  s.replicas = 2;
  s.inter.latency_s = 0.01;
  s.intra = {1e11, 1e-4};
  const double n = 4e9, step = 0.4;
  const double inner = 2 * n * (1 - 2.0 / 8) / 1e11 + 1e-4;
  const double across = 2 * n * (1 - 1.0 / 8) / 1e10 + 0.01;
  EXPECT_NEAR(analytic_utilisation(s, spec("dp")).utilisation, step / (step + across), 1e-12);
  EXPECT_NEAR(analytic_utilisation(s, spec("diloco:h=50")).utilisation, step / (step + inner + across / 50), 1e-12);
  // Four fragments of n/4, each hidden behind one step of compute.
  const double fragment = 2 * (n / 4) * (1 - 1.0 / 8) / 1e10 + 0.01;
  EXPECT_NEAR(analytic_utilisation(s, spec("streaming:h=50:fragments=4:tau=1")).utilisation,
              step / (step + inner + 4 * std::max(0.0, fragment - step) / 50), 1e-12);
  EXPECT_NEAR(analytic_utilisation(s, spec("noloco:h=50")).utilisation,
              step / (step + inner + (2 * n / 1e10 + 0.01) / 50), 1e-12);
}

// docs/algorithm-reference.md §4: Streaming DiLoCo's table, 1B model, H = 100. Every cell within 15%.
TEST(SimCalibration, ReproducesThePublishedTableWithin15Percent) {
  auto results = run_calibration();
  ASSERT_EQ(results.size(), 5u);
  for (const auto& r : results) {
    for (std::size_t i = 0; i < kCalibrationTargets.size(); ++i) {
      EXPECT_LE(std::abs(r.relative_error[i]), 0.15)
          << r.row.method << " at " << kCalibrationTargets[i] * 100 << "%: simulated " << r.simulated_gbps[i]
          << " Gbit/s, published " << r.row.published_gbps[i];
    }
  }
}

TEST(SimCalibration, SelectedCellsAndTheOrderOfTheMethods) {
  auto results = run_calibration();
  auto cell = [&](std::size_t row, std::size_t target) { return results[row].simulated_gbps[target]; };
  EXPECT_NEAR(cell(0, 0), 86.8, 0.15 * 86.8);  // data parallel, 50%
  EXPECT_NEAR(cell(1, 2), 13.3, 0.15 * 13.3);  // DiLoCo, 90%
  EXPECT_NEAR(cell(2, 4), 28.1, 0.15 * 28.1);  // Streaming, 99%
  EXPECT_NEAR(cell(3, 4), 11.0, 0.15 * 11.0);  // + overlap, 99%
  EXPECT_NEAR(cell(4, 2), 1.7, 0.15 * 1.7);    // + overlap + FP4, 90%
  // At every target: data parallel needs most, then DiLoCo, Streaming, overlap, FP4.
  for (std::size_t t = 0; t < kCalibrationTargets.size(); ++t) {
    for (std::size_t row = 1; row < results.size(); ++row) {
      EXPECT_LE(cell(row, t), cell(row - 1, t) * 1.0001) << "row " << row << " target " << t;
    }
  }
}

}  // namespace
}  // namespace loco::sim
