// A compact BFGS minimiser (inverse-Hessian form) with a line search that satisfies the strong
// Wolfe conditions (Nocedal & Wright, algorithms 3.5 and 3.6, bisection in the zoom). For the
// few-parameter scaling-law fits; no external library needed.
#pragma once

#include <functional>
#include <vector>

namespace loco::sim {

// Returns f(x) and, when `gradient` is not null, writes ∇f(x) into it (sized like x).
using Objective = std::function<double(const std::vector<double>& x, std::vector<double>* gradient)>;

struct BfgsOptions {
  int max_iterations = 500;
  double gradient_tolerance = 1e-10;  // stop when max |∂f/∂x_i| falls below this
};

struct BfgsResult {
  std::vector<double> x;
  double value = 0;
  int iterations = 0;
  bool converged = false;  // gradient small; false when stopped by the iteration limit or stalled
};

BfgsResult minimize_bfgs(const Objective& f, std::vector<double> x0, const BfgsOptions& options = {});

}  // namespace loco::sim
