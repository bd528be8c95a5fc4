#include "loco/sim/additive_law.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "loco/sim/bfgs.h"
#include "loco/sim/power_law.h"
#include "loco/util/error.h"

namespace loco::sim {

namespace {

// Features of the decorrelated exponent, and the means removed from them.
struct Design {
  std::vector<double> size_feature, replica_feature, log_loss;
  double mean_log_n = 0, mean_m_log_n = 0;
};

Design make_design(const std::vector<double>& n, const std::vector<double>& m, const std::vector<double>& loss) {
  Design d;
  const double count = static_cast<double>(n.size());
  for (std::size_t i = 0; i < n.size(); ++i) {
    d.mean_log_n += std::log(n[i]) / count;
    d.mean_m_log_n += m[i] * std::log(n[i]) / count;
  }
  for (std::size_t i = 0; i < n.size(); ++i) {
    d.size_feature.push_back(std::log(n[i]) - d.mean_log_n);
    d.replica_feature.push_back(m[i] * std::log(n[i]) - d.mean_m_log_n);
    d.log_loss.push_back(std::log(loss[i]));
  }
  return d;
}

// z = (a0, α, β, log C); value = Σ huber(log(exp(u) + C) − log L), u = a0 + α·f1 + β·f2.
double objective(const Design& d, double delta, const std::vector<double>& z, std::vector<double>* grad) {
  if (grad != nullptr) std::fill(grad->begin(), grad->end(), 0.0);
  double total = 0;
  const double c = std::exp(z[3]);
  for (std::size_t i = 0; i < d.log_loss.size(); ++i) {
    const double power = std::exp(z[0] + z[1] * d.size_feature[i] + z[2] * d.replica_feature[i]);
    const double predicted = power + c;
    const double r = std::log(predicted) - d.log_loss[i];
    total += huber(r, delta);
    if (grad != nullptr) {
      const double dr = huber_derivative(r, delta);
      const double share = power / predicted;  // ∂ log(pred) / ∂u
      (*grad)[0] += dr * share;
      (*grad)[1] += dr * share * d.size_feature[i];
      (*grad)[2] += dr * share * d.replica_feature[i];
      (*grad)[3] += dr * c / predicted;
    }
  }
  return total;
}

double uniform(std::mt19937_64& rng, double low, double high) {
  // From the raw 64-bit output, so the starts are the same with every standard library.
  return low + (high - low) * (static_cast<double>(rng() >> 11) * 0x1.0p-53);
}

}  // namespace

double AdditiveLaw::operator()(double n, double m) const { return A * std::pow(n, alpha + beta * m) + C; }

double huber(double r, double delta) {
  double a = std::abs(r);
  return a <= delta ? 0.5 * r * r : delta * (a - 0.5 * delta);
}

double huber_derivative(double r, double delta) { return std::abs(r) <= delta ? r : (r > 0 ? delta : -delta); }

AdditiveFit fit_additive_law(const std::vector<double>& n, const std::vector<double>& m,
                             const std::vector<double>& loss, const AdditiveFitOptions& options) {
  const std::string what = "the loss table";
  if (n.size() < 4) {
    throw DataError(
        fmt::format("cannot fit L = A·N^(α+β·M) + C: {} point{} for 4 parameters. Add runs "
                    "(at least 4 points over two or more sizes and replica counts).",
                    n.size(), n.size() == 1 ? "" : "s"));
  }
  require_positive_values(n, "N", what);
  require_positive_values(m, "M", what);
  require_positive_values(loss, "the loss", what);
  if (std::set<double>(n.begin(), n.end()).size() < 2 || std::set<double>(m.begin(), m.end()).size() < 2) {
    throw DataError(
        "cannot fit L = A·N^(α+β·M) + C: it needs at least two sizes and two replica "
        "counts, or α and β cannot be told apart.");
  }
  if (options.starts < 1 || !(options.huber_delta > 0)) {
    throw ConfigError(
        fmt::format("the fit needs at least one start and a positive Huber delta (got {} "
                    "and {}).",
                    options.starts, options.huber_delta));
  }
  // Every start is a BFGS fit over every point: bounded together, as a fit of 100,000 points (or of 1,000
  // from 10,000 starts) ran for minutes without a word. The report names the form as skipped, and why.
  const double point_fits = static_cast<double>(n.size()) * options.starts;
  if (point_fits > kMostPointFits) {
    const auto fewer = static_cast<long long>(kMostPointFits / static_cast<double>(n.size()));
    throw DataError(
        fmt::format("fitting L = A·N^(α+β·M) + C to {} points from {} starts is {:.3g} point-fits, beyond "
                    "the {:.0e} that take about a minute: {}",
                    n.size(), options.starts, point_fits, kMostPointFits,
                    fewer >= 1 ? fmt::format("give --starts {} or fewer", fewer)
                               : "fit fewer points (the best run of each size and replica count)"));
  }
  const Design d = make_design(n, m, loss);
  const double min_loss = *std::min_element(loss.begin(), loss.end());
  double mean_log_loss = 0;
  for (double v : d.log_loss) mean_log_loss += v / static_cast<double>(loss.size());
  Objective f = [&](const std::vector<double>& z, std::vector<double>* grad) {
    return objective(d, options.huber_delta, z, grad);
  };

  std::mt19937_64 rng(options.seed);
  AdditiveFit best;
  best.objective = INFINITY;
  std::vector<double> objectives;
  for (int start = 0; start < options.starts; ++start) {
    // A random exponent and floor; a0 then puts the curve through the data's middle.
    double alpha = uniform(rng, -0.6, 0.0), beta = uniform(rng, -0.05, 0.05);
    double c = uniform(rng, 1e-3, 0.99) * min_loss;
    double a0 = std::log(std::max(std::exp(mean_log_loss) - c, 1e-6 * min_loss));
    BfgsResult r = minimize_bfgs(f, {a0, alpha, beta, std::log(c)});
    objectives.push_back(r.value);
    if (std::isfinite(r.value) && r.value < best.objective) {
      best.objective = r.value;
      const auto& z = r.x;
      best.law = {std::exp(z[0] - z[1] * d.mean_log_n - z[2] * d.mean_m_log_n), z[1], z[2], std::exp(z[3])};
    }
  }
  if (!std::isfinite(best.objective)) {
    throw DataError(
        "the fit of L = A·N^(α+β·M) + C diverged from every start; check the data for "
        "outliers or use more --starts.");
  }
  best.starts = options.starts;
  for (double v : objectives) {
    if (v <= best.objective + 1e-6 * std::max(best.objective, 1e-12)) ++best.starts_at_optimum;
  }
  return best;
}

}  // namespace loco::sim
