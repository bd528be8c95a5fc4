#include "loco/sim/hyper_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "loco/util/error.h"

namespace loco::sim {

namespace {

std::string not_swept(const Hyperparameter& quantity) {
  return fmt::format("no size was run at more than one {}; sweep it to find its optimum", quantity.name);
}

// Refits `fit` on the optima below the largest N and measures how far it misses the optima at that N.
// `optima`: (N, M, value); `predict(law, N, M)`.
template <typename Law, typename Fit, typename Predict>
HyperHoldOut hold_out_largest(const std::vector<std::tuple<double, int, double>>& optima, Fit fit, Predict predict) {
  HyperHoldOut out;
  double largest = 0;
  for (const auto& o : optima) largest = std::max(largest, std::get<0>(o));
  std::vector<std::tuple<double, int, double>> kept, held;
  for (const auto& o : optima) (std::get<0>(o) == largest ? held : kept).push_back(o);
  try {
    const Law law = fit(kept);
    double error = 0;
    for (const auto& [n, m, value] : held) error += std::abs(predict(law, n, m) / value - 1);
    out.mean_abs_relative_error = error / static_cast<double>(held.size());
  } catch (const DataError& e) {
    out.note = fmt::format("without the largest N: {}", e.what());
  }
  return out;
}

}  // namespace

HyperFit fit_hyperparameter(const std::vector<FitPoint>& group, const std::string& algorithm, int replicas,
                            const Hyperparameter& quantity) {
  HyperFit h{quantity.name, algorithm, replicas, {}, std::nullopt, "", {}};
  std::map<double, const FitPoint*> best;
  std::map<double, std::set<double>> tried;
  for (const auto& p : group) {
    const double value = p.*quantity.field;
    if (std::isnan(value)) continue;
    tried[p.params].insert(value);
    auto it = best.find(p.params);
    if (it == best.end() || p.loss < it->second->loss) best[p.params] = &p;
  }
  bool swept = std::any_of(tried.begin(), tried.end(), [](const auto& t) { return t.second.size() > 1; });
  if (!swept) {
    h.skipped = not_swept(quantity);
    return h;
  }
  std::vector<std::tuple<double, int, double>> optima;
  for (const auto& [params, point] : best) {
    h.optima.emplace_back(params, point->*quantity.field);
    optima.emplace_back(params, replicas, point->*quantity.field);
  }
  const std::string what = fmt::format("the optimal {} of {} M={}", quantity.name, algorithm, replicas);
  const auto fit = [&what](const std::vector<std::tuple<double, int, double>>& points) {
    std::vector<double> n, y;
    for (const auto& [params, m, value] : points) {
      n.push_back(params);
      y.push_back(value);
    }
    return fit_power_law(n, y, what);
  };
  try {
    h.law = fit(optima);
    h.holdout = hold_out_largest<PowerLaw>(optima, fit, [](const PowerLaw& law, double n, int) { return law(n); });
  } catch (const DataError& e) {
    h.skipped = e.what();
  }
  return h;
}

JointHyperFit fit_joint_hyperparameter(const std::vector<HyperFit>& per_group, const std::string& algorithm,
                                       const Hyperparameter& quantity) {
  JointHyperFit joint{quantity.name, algorithm, {}, std::nullopt, "", {}};
  for (const auto& h : per_group) {
    if (h.algorithm != algorithm || h.quantity != quantity.name) continue;
    for (const auto& [params, value] : h.optima) joint.optima.emplace_back(params, h.replicas, value);
  }
  if (joint.optima.empty()) {
    joint.skipped = not_swept(quantity);
    return joint;
  }
  const std::string what = fmt::format("the optimal {} of {}", quantity.name, algorithm);
  const auto fit = [&what](const std::vector<std::tuple<double, int, double>>& points) {
    std::vector<double> n, m, y;
    for (const auto& [params, replicas, value] : points) {
      n.push_back(params);
      m.push_back(replicas);
      y.push_back(value);
    }
    return fit_joint_power_law(n, m, y, what);
  };
  try {
    joint.law = fit(joint.optima);
    joint.holdout = hold_out_largest<JointPowerLaw>(
        joint.optima, fit, [](const JointPowerLaw& law, double n, int m) { return law(n, m); });
  } catch (const DataError& e) {
    joint.skipped = e.what();
  }
  return joint;
}

}  // namespace loco::sim
