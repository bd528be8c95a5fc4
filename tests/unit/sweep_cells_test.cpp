#include "loco/sweep/sweep_cells.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"

namespace loco {
namespace {

using test::ScratchDir;
using test::write_text;

// Two cells (hidden 32 and 64) of two learning rates each; the best of each cell is repeated with seeds
// 1 and 2.
SweepPlan two_cells(const ScratchDir& dir) {
  write_text(dir / "base.toml", test::tiny_model_toml("data/x") + "[train]\nsteps = 10\nbatch_size = 2\n");
  write_text(dir / "sweep.toml", R"(
base = "base.toml"
out_dir = "o"
[axes]
"model.hidden_size" = [32, 64]
"optim.lr" = [1e-3, 2e-3]
[best]
tuned = ["optim.lr"]
[best.repeat]
"train.seed" = [1, 2]
)");
  return read_sweep_plan(dir / "sweep.toml");
}

nlohmann::json result(double loss) { return {{"loss", loss}, {"axes", nlohmann::json::object()}}; }

TEST(SweepCells, TheBestRunOfACellIsChosenOnlyOnceAllItsRunsHaveResults) {
  ScratchDir dir;
  const SweepPlan plan = two_cells(dir);
  SweepResults results = {{"hidden_size-32_lr-0.001", result(3.2)},
                          {"hidden_size-32_lr-0.002", result(3.1)},
                          {"hidden_size-64_lr-0.002", result(2.9)}};
  auto cells = find_cells(plan, results);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].name, "hidden_size-32");
  EXPECT_EQ(cells[0].runs.size(), 2u);
  ASSERT_NE(cells[0].best, nullptr);
  EXPECT_EQ(cells[0].best->name, "hidden_size-32_lr-0.002");
  EXPECT_EQ(cells[1].best, nullptr);  // hidden_size-64_lr-0.001 has no result yet
  // A diverged run (loss null or NaN) is never the best; a tie goes to the earlier run.
  results["hidden_size-64_lr-0.001"] = {{"loss", nullptr}, {"axes", nlohmann::json::object()}};
  cells = find_cells(plan, results);
  ASSERT_NE(cells[1].best, nullptr);
  EXPECT_EQ(cells[1].best->name, "hidden_size-64_lr-0.002");
  results["hidden_size-64_lr-0.001"] = result(2.9);
  EXPECT_EQ(find_cells(plan, results)[1].best->name, "hidden_size-64_lr-0.001");
  EXPECT_TRUE(std::isinf(result_loss({{"loss", NAN}})));
  EXPECT_TRUE(std::isinf(result_loss(nlohmann::json::object())));
}

TEST(SweepCells, ACellsRowAveragesItsBestRunWithItsRepeats) {
  ScratchDir dir;
  const SweepPlan plan = two_cells(dir);
  SweepResults results = {{"hidden_size-32_lr-0.001", result(3.0)},
                          {"hidden_size-32_lr-0.002", result(3.5)},
                          {"hidden_size-32_lr-0.001_seed-1", result(3.2)},
                          {"hidden_size-32_lr-0.001_seed-2", result(3.4)}};
  results["hidden_size-32_lr-0.001"]["outer_lr"] = 0.5;
  const auto cells = find_cells(plan, results);
  const nlohmann::json row = cell_row(plan, cells[0], results);
  EXPECT_EQ(row.at("cell"), "hidden_size-32");
  EXPECT_EQ(row.at("best_run"), "hidden_size-32_lr-0.001");
  EXPECT_EQ(row.at("outer_lr"), 0.5);  // the best run's own fields are kept
  EXPECT_EQ(row.at("seeds"), 3);
  EXPECT_NEAR(row.at("loss").get<double>(), 3.2, 1e-12);
  EXPECT_NEAR(row.at("loss_best_run").get<double>(), 3.0, 1e-12);
  EXPECT_NEAR(row.at("loss_min").get<double>(), 3.0, 1e-12);
  EXPECT_NEAR(row.at("loss_max").get<double>(), 3.4, 1e-12);
  EXPECT_NEAR(row.at("loss_sd").get<double>(), 0.2, 1e-12);  // sample standard deviation of 3.0, 3.2, 3.4
  // Without its repeats (not run yet), the row is the best run alone.
  results.erase("hidden_size-32_lr-0.001_seed-1");
  results.erase("hidden_size-32_lr-0.001_seed-2");
  const nlohmann::json alone = cell_row(plan, find_cells(plan, results)[0], results);
  EXPECT_EQ(alone.at("seeds"), 1);
  EXPECT_EQ(alone.at("loss_sd"), 0.0);
}

}  // namespace
}  // namespace loco
