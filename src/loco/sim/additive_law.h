// L(N, M) = A·N^(α+β·M) + C, the best held-out form of the DiLoCo scaling-law paper
// (docs/algorithm-reference.md §3), fitted like Chinchilla's: Huber loss on log(prediction) − log(loss),
// minimised by BFGS from many random starts; the best start wins.
//
// Internally A and C are fitted as logarithms (both stay positive) and the exponent as
// a0 + α·(ln N − mean ln N) + β·(M·ln N − mean M·ln N), which decorrelates A from α and β.
#pragma once

#include <cstdint>
#include <vector>

namespace loco::sim {

struct AdditiveLaw {
  double A = 0, alpha = 0, beta = 0, C = 0;
  double operator()(double n, double m) const;
};

struct AdditiveFitOptions {
  int starts = 64;
  double huber_delta = 1e-3;
  std::uint64_t seed = 0;
};

struct AdditiveFit {
  AdditiveLaw law;
  double objective = 0;  // sum of Huber losses at the optimum
  int starts = 0;
  int starts_at_optimum = 0;  // starts that ended within 1e-6 (relative) of the best objective
};

// Points × starts a fit may take (each start a BFGS fit over every point; about a minute on a 2-core VM).
inline constexpr double kMostPointFits = 1e6;

// Throws DataError with fewer than 4 points, fewer than 2 sizes or 2 replica counts, or values
// that are not positive and finite; ConfigError when the options are impossible.
AdditiveFit fit_additive_law(const std::vector<double>& n, const std::vector<double>& m,
                             const std::vector<double>& loss, const AdditiveFitOptions& options);

// Huber loss: r²/2 for |r| ≤ δ, δ·(|r| − δ/2) beyond; and its derivative.
double huber(double r, double delta);
double huber_derivative(double r, double delta);

}  // namespace loco::sim
