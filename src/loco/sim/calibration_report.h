// `loco simulate --calibrate`: the calibration scenario through the schedule simulator, cell by
// cell against the published table, with relative errors.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loco/sim/calibration.h"

namespace loco::sim {

struct CalibrationResult {
  CalibrationRow row;
  std::array<double, 5> simulated_gbps;
  std::array<double, 5> relative_error;  // simulated / published − 1
};

std::vector<CalibrationResult> run_calibration();
double worst_relative_error(const std::vector<CalibrationResult>& results);
std::string format_calibration_table(const std::vector<CalibrationResult>& results);
nlohmann::json calibration_json(const std::vector<CalibrationResult>& results);

}  // namespace loco::sim
