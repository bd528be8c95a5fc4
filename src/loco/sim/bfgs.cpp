#include "loco/sim/bfgs.h"

#include <algorithm>
#include <cmath>

namespace loco::sim {

namespace {

using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double max_abs(const Vec& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}

Vec along(const Vec& x, double step, const Vec& direction) {
  Vec y = x;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += step * direction[i];
  return y;
}

// A point on the search line: step length, value, directional derivative, gradient.
struct LinePoint {
  double step = 0, value = 0, slope = 0;
  Vec gradient;
};

// Strong Wolfe line search from `start` along `direction` (a descent direction). Returns a point
// with a lower value, or `start` itself when none is found (the search stalled).
LinePoint wolfe_search(const Objective& f, const Vec& x, const Vec& direction, const LinePoint& start) {
  constexpr double kSufficientDecrease = 1e-4, kCurvature = 0.9;
  auto evaluate = [&](double step) {
    LinePoint p;
    p.step = step;
    p.gradient.resize(x.size());
    p.value = f(along(x, step, direction), &p.gradient);
    p.slope = dot(p.gradient, direction);
    return p;
  };
  auto armijo = [&](const LinePoint& p) {
    return std::isfinite(p.value) && p.value <= start.value + kSufficientDecrease * p.step * start.slope;
  };
  auto curvature = [&](const LinePoint& p) { return std::abs(p.slope) <= -kCurvature * start.slope; };
  auto zoom = [&](LinePoint low, LinePoint high) {
    for (int i = 0; i < 60; ++i) {
      LinePoint mid = evaluate(0.5 * (low.step + high.step));
      if (!armijo(mid) || mid.value >= low.value) {
        high = mid;
      } else {
        if (curvature(mid)) return mid;
        if (mid.slope * (high.step - low.step) >= 0) high = low;
        low = mid;
      }
    }
    return low;
  };
  LinePoint previous = start;
  double step = 1;
  for (int i = 0; i < 60; ++i) {
    LinePoint p = evaluate(step);
    if (!armijo(p) || (i > 0 && p.value >= previous.value)) return zoom(previous, p);
    if (curvature(p)) return p;
    if (p.slope >= 0) return zoom(p, previous);
    previous = p;
    step *= 2;
  }
  return previous;
}

}  // namespace

BfgsResult minimize_bfgs(const Objective& f, Vec x, const BfgsOptions& options) {
  const std::size_t n = x.size();
  Vec gradient(n);
  double value = f(x, &gradient);
  std::vector<Vec> inverse_hessian(n, Vec(n, 0));
  auto reset = [&] {
    for (std::size_t i = 0; i < n; ++i) std::fill(inverse_hessian[i].begin(), inverse_hessian[i].end(), 0);
    // A first step of length about 1 in the largest coordinate.
    double scale = 1 / std::max(max_abs(gradient), 1e-300);
    for (std::size_t i = 0; i < n; ++i) inverse_hessian[i][i] = scale;
  };
  reset();
  BfgsResult result;
  for (int iteration = 0; iteration < options.max_iterations; ++iteration) {
    result.iterations = iteration;
    if (!std::isfinite(value) || max_abs(gradient) < options.gradient_tolerance) break;
    Vec direction(n, 0);
    for (std::size_t i = 0; i < n; ++i) direction[i] = -dot(inverse_hessian[i], gradient);
    if (dot(direction, gradient) >= 0) {
      reset();
      for (std::size_t i = 0; i < n; ++i) direction[i] = -inverse_hessian[i][i] * gradient[i];
    }
    LinePoint start{0, value, dot(direction, gradient), gradient};
    LinePoint next = wolfe_search(f, x, direction, start);
    if (next.step == 0 || !(next.value < value)) break;  // no further decrease: stalled
    Vec s(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      s[i] = next.step * direction[i];
      y[i] = next.gradient[i] - gradient[i];
    }
    x = along(x, next.step, direction);
    value = next.value;
    gradient = next.gradient;
    double sy = dot(s, y);
    if (sy <= 1e-300) continue;  // curvature not positive: keep the old approximation
    // H ← (I − ρ s yᵀ) H (I − ρ y sᵀ) + ρ s sᵀ, with ρ = 1 / sᵀy.
    double rho = 1 / sy;
    Vec hy(n);
    for (std::size_t i = 0; i < n; ++i) hy[i] = dot(inverse_hessian[i], y);
    double yhy = dot(y, hy);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        inverse_hessian[i][j] += -rho * (hy[i] * s[j] + s[i] * hy[j]) + (rho * rho * yhy + rho) * s[i] * s[j];
      }
    }
  }
  result.x = x;
  result.value = value;
  result.converged = std::isfinite(value) && max_abs(gradient) < options.gradient_tolerance;
  return result;
}

}  // namespace loco::sim
