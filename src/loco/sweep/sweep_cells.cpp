#include "loco/sweep/sweep_cells.h"

#include <cmath>
#include <limits>

namespace loco {

double result_loss(const nlohmann::json& result) {
  const auto it = result.find("loss");
  if (it == result.end() || !it->is_number()) return std::numeric_limits<double>::infinity();
  const double loss = it->get<double>();
  return std::isfinite(loss) ? loss : std::numeric_limits<double>::infinity();
}

std::vector<SweepCell> find_cells(const SweepPlan& plan, const SweepResults& results) {
  std::vector<SweepCell> cells;
  std::map<std::string, std::size_t> index;
  for (const SweepRun& run : plan.runs) {
    auto [it, added] = index.emplace(run.cell, cells.size());
    if (added) cells.push_back({run.cell, {}, nullptr});
    cells[it->second].runs.push_back(&run);
  }
  for (SweepCell& cell : cells) {
    bool complete = true;
    const SweepRun* best = nullptr;
    double best_loss = 0;
    for (const SweepRun* run : cell.runs) {
      const auto result = results.find(run->name);
      if (result == results.end()) {
        complete = false;
        break;
      }
      const double loss = result_loss(result->second);
      if (best == nullptr || loss < best_loss) {
        best = run;
        best_loss = loss;
      }
    }
    if (complete) cell.best = best;
  }
  return cells;
}

nlohmann::json cell_row(const SweepPlan& plan, const SweepCell& cell, const SweepResults& results) {
  nlohmann::json row = results.at(cell.best->name);
  std::vector<double> losses = {result_loss(row)};
  for (const SweepRun& repeat : repeats_of(plan, *cell.best)) {
    const auto it = results.find(repeat.name);
    if (it != results.end()) losses.push_back(result_loss(it->second));
  }
  double sum = 0, low = losses.front(), high = losses.front();
  for (const double loss : losses) {
    sum += loss;
    low = std::min(low, loss);
    high = std::max(high, loss);
  }
  const double mean = sum / static_cast<double>(losses.size());
  double squares = 0;
  for (const double loss : losses) squares += (loss - mean) * (loss - mean);
  const double sd = losses.size() > 1 ? std::sqrt(squares / static_cast<double>(losses.size() - 1)) : 0.0;
  row["cell"] = cell.name;
  row["best_run"] = cell.best->name;
  row["loss_best_run"] = row["loss"];
  row["loss"] = mean;
  row["seeds"] = losses.size();
  row["loss_min"] = low;
  row["loss_max"] = high;
  row["loss_sd"] = sd;
  return row;
}

}  // namespace loco
