// The calibration table of docs/algorithm-reference.md §4 (Streaming DiLoCo, Douillard et al. 2025): inter-replica
// bandwidth in Gbit/s needed for 50/80/90/95/99% compute utilisation, 1B model, H = 100, 3-layer
// fragments, and the scenario loco uses to reproduce it. docs/simulate.md derives the choices.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "loco/sim/algorithm_spec.h"
#include "loco/sim/scenario.h"

namespace loco::sim {

inline constexpr std::array<double, 5> kCalibrationTargets = {0.50, 0.80, 0.90, 0.95, 0.99};

struct CalibrationRow {
  std::string method;  // as the paper names the row
  AlgorithmSpec algorithm;
  std::array<double, 5> published_gbps;
};

// 24 layers, 0.1 s per step, two replicas of one worker each (only the inter-replica link is
// modelled), bf16 exchanges, and 0.91e9 exchanged values (see docs/simulate.md, "Calibration").
Scenario calibration_scenario();
std::vector<CalibrationRow> calibration_rows();

}  // namespace loco::sim
