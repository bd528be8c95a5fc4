// `loco simulate` results: utilisation at a bandwidth and the bandwidth each target utilisation
// needs, per algorithm and timing model; as a terminal table, as JSON, and as a sweep (CSV + PNG).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loco/sim/algorithm_spec.h"
#include "loco/sim/bandwidth_search.h"
#include "loco/sim/scenario.h"

namespace loco::sim {

struct SimulationRequest {
  Scenario scenario;  // inter.bandwidth_bps is ignored; see `bandwidth_bps`
  std::vector<AlgorithmSpec> algorithms;
  std::vector<TimingModel> models;
  std::vector<double> targets;          // utilisations, 0 < target < 1
  std::optional<double> bandwidth_bps;  // also report utilisation at this bandwidth
};

struct AlgorithmOutcome {
  AlgorithmSpec algorithm;
  TimingModel model = TimingModel::kSchedule;
  std::optional<double> utilisation;  // at request.bandwidth_bps
  // Per target: bits/s needed; 0 when the link is not used; nullopt when no bandwidth suffices.
  std::vector<std::optional<double>> bandwidth_bps;
};

struct SimulationReport {
  SimulationRequest request;
  std::vector<AlgorithmOutcome> outcomes;
};

// Validates the request (ConfigError) and computes every outcome.
SimulationReport run_simulation(const SimulationRequest& request);
std::string format_simulation_table(const SimulationReport& report);
nlohmann::json simulation_json(const SimulationReport& report);
nlohmann::json scenario_json(const Scenario& scenario);

// Utilisation of every (algorithm, model) on a log-spaced grid of inter-replica bandwidths.
struct Sweep {
  std::vector<double> bandwidth_bps;
  std::vector<std::string> curves;               // one label per (algorithm, model)
  std::vector<std::vector<double>> utilisation;  // [curve][point]
};

// ConfigError when the sweep's `points` replays with the schedule model would take beyond kMaxTotalLayerSteps.
void require_bounded_sweep(const SimulationRequest& request, int points);
Sweep run_sweep(const SimulationRequest& request, double low_bps, double high_bps, int points);
std::string sweep_csv(const Sweep& sweep);
// Writes <dir>/utilisation.csv, utilisation.png and utilisation.gp; returns the CSV and PNG paths.
std::pair<std::filesystem::path, std::filesystem::path> write_sweep(const Sweep& sweep,
                                                                    const std::filesystem::path& dir,
                                                                    const std::string& title);

}  // namespace loco::sim
