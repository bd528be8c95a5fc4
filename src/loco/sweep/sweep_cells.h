// The cells of a sweep with [best] (docs/sweep.md): a cell is a grid and the values of its untuned axes;
// its best run is the one with the lowest final loss over the tuned axes, and its row in cells.csv
// averages that run with its repeats (other seeds), as the scaling-law paper reports the best
// hyperparameters per cell. Pure: results in, rows out.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loco/sweep/sweep_plan.h"

namespace loco {

// A run's result (sweep_result.json) by run name.
using SweepResults = std::map<std::string, nlohmann::json>;

struct SweepCell {
  std::string name;
  std::vector<const SweepRun*> runs;  // the grid runs of the cell, in plan order
  const SweepRun* best = nullptr;     // null until every run of the cell has a result
};

// The final loss of a result; +infinity when it is missing or not a number (a diverged run).
double result_loss(const nlohmann::json& result);

// The cells of `plan` in plan order; a cell's best is chosen only once all its runs have results (a
// resumed sweep must not pick another best after the repeats ran). Ties go to the earlier run.
std::vector<SweepCell> find_cells(const SweepPlan& plan, const SweepResults& results);

// A cell's row: the best run's result, with `loss` the mean over it and its repeats that have results,
// and `cell`, `best_run`, `seeds` (how many runs the mean has), `loss_best_run`, `loss_min`, `loss_max`
// and `loss_sd` (sample standard deviation; 0 for one run).
nlohmann::json cell_row(const SweepPlan& plan, const SweepCell& cell, const SweepResults& results);

}  // namespace loco
