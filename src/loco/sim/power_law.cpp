#include "loco/sim/power_law.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "loco/sim/least_squares.h"
#include "loco/util/error.h"

namespace loco::sim {

namespace {

void require_points(std::size_t points, std::size_t parameters, const std::string& form, const std::string& what) {
  if (points < parameters) {
    throw DataError(
        fmt::format("cannot fit {} to {}: {} point{} for {} parameters. Add runs (at "
                    "least {} points) or fit a simpler form.",
                    form, what, points, points == 1 ? "" : "s", parameters, parameters));
  }
}

std::size_t distinct(const std::vector<double>& values) {
  return std::set<double>(values.begin(), values.end()).size();
}

// The prefactor is exp of the fitted intercept: values spanning hundreds of orders of magnitude (a loss of
// 1e308 among losses of 3) give a slope whose intercept exp cannot hold, and A = 0 or inf with NaN errors.
double prefactor(double log_a, const std::vector<double>& y, const std::string& what) {
  const double a = std::exp(log_a);
  if (!std::isfinite(a) || a == 0) {
    const auto [low, high] = std::minmax_element(y.begin(), y.end());
    throw DataError(
        fmt::format("cannot fit a power law to {}: its values run from {:g} to {:g}, and the fit's "
                    "prefactor A = e^{:g} is beyond double precision. A value is probably mistyped; "
                    "fix or remove that point.",
                    what, *low, *high, log_a));
  }
  return a;
}

}  // namespace

double PowerLaw::operator()(double n) const { return A * std::pow(n, alpha); }

double JointPowerLaw::operator()(double n, double m) const { return A * std::pow(n, alpha) * std::pow(m, beta); }

void require_positive_values(const std::vector<double>& values, const std::string& quantity, const std::string& what) {
  for (double v : values) {
    // Subnormal values (1e-320) too: their logarithms are finite but they keep no precision.
    if (!std::isnormal(v) || v < 0) {
      throw DataError(
          fmt::format("{} of {} contains {:g}; a power law needs positive finite values (from {:g}). "
                      "Remove or fix that point.",
                      quantity, what, v, std::numeric_limits<double>::min()));
    }
  }
}

PowerLaw fit_power_law(const std::vector<double>& n, const std::vector<double>& y, const std::string& what) {
  require_points(n.size(), 2, "y = A·N^α", what);
  require_positive_values(n, "N", what);
  require_positive_values(y, "the fitted value", what);
  if (distinct(n) < 2) {
    throw DataError(
        fmt::format("cannot fit A·N^α to {}: every point has N = {:.4g}; runs at two or "
                    "more sizes are needed.",
                    what, n[0]));
  }
  std::vector<std::vector<double>> rows;
  std::vector<double> target;
  for (std::size_t i = 0; i < n.size(); ++i) {
    rows.push_back({1.0, std::log(n[i])});
    target.push_back(std::log(y[i]));
  }
  auto x = solve_least_squares(rows, target);
  LOCO_CHECK(x.has_value(), "power law of {} is singular despite {} distinct sizes", what, distinct(n));
  return {prefactor((*x)[0], y, what), (*x)[1]};
}

JointPowerLaw fit_joint_power_law(const std::vector<double>& n, const std::vector<double>& m,
                                  const std::vector<double>& loss, const std::string& what) {
  require_points(n.size(), 3, "L = A·N^α·M^β", what);
  require_positive_values(n, "N", what);
  require_positive_values(m, "M", what);
  require_positive_values(loss, "the loss", what);
  if (distinct(n) < 2 || distinct(m) < 2) {
    throw DataError(
        fmt::format("cannot fit A·N^α·M^β to {}: it needs at least two sizes and two "
                    "replica counts (got {} and {}).",
                    what, distinct(n), distinct(m)));
  }
  std::vector<std::vector<double>> rows;
  std::vector<double> target;
  for (std::size_t i = 0; i < n.size(); ++i) {
    rows.push_back({1.0, std::log(n[i]), std::log(m[i])});
    target.push_back(std::log(loss[i]));
  }
  auto x = solve_least_squares(rows, target);
  if (!x) {
    throw DataError(
        fmt::format("cannot fit A·N^α·M^β to {}: N and M vary together (every size was run "
                    "at one replica count), so α and β cannot be told apart.",
                    what));
  }
  return {prefactor((*x)[0], loss, what), (*x)[1], (*x)[2]};
}

}  // namespace loco::sim
