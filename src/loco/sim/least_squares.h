// Linear least squares for the small systems of the power-law fits (a handful of columns), solved
// by Householder QR so that nearly collinear columns (all runs at one size) are detected.
#pragma once

#include <optional>
#include <vector>

namespace loco::sim {

// Minimises ||A·x − y||² for A with rows `rows` (all the same length n ≤ rows.size()). Returns
// nullopt when A's columns are linearly dependent (relative to its largest pivot).
std::optional<std::vector<double>> solve_least_squares(const std::vector<std::vector<double>>& rows,
                                                       const std::vector<double>& y);

}  // namespace loco::sim
