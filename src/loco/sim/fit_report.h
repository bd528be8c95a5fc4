// `loco fit` output: a terminal report, JSON, and a PNG chart of the fits over the data.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "loco/sim/scaling_fit.h"

namespace loco::sim {

std::string format_fit_report(const FitReport& report);
nlohmann::json fit_json(const FitReport& report);

// Loss against N (log-log): the data per group, the per-group power laws (dashed) and the additive
// form for each M of the joint algorithm (solid). Writes `png` and its script (`png` with .gp).
void write_fit_chart(const FitReport& report, const std::filesystem::path& png);

}  // namespace loco::sim
