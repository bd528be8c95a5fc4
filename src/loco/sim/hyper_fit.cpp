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

}  // namespace

HyperFit fit_hyperparameter(const std::vector<FitPoint>& group, const std::string& algorithm, int replicas,
                            const Hyperparameter& quantity) {
  HyperFit h{quantity.name, algorithm, replicas, {}, std::nullopt, ""};
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
  std::vector<double> n, y;
  for (const auto& [params, point] : best) {
    h.optima.emplace_back(params, point->*quantity.field);
    n.push_back(params);
    y.push_back(point->*quantity.field);
  }
  try {
    h.law = fit_power_law(n, y, fmt::format("the optimal {} of {} M={}", quantity.name, algorithm, replicas));
  } catch (const DataError& e) {
    h.skipped = e.what();
  }
  return h;
}

JointHyperFit fit_joint_hyperparameter(const std::vector<HyperFit>& per_group, const std::string& algorithm,
                                       const Hyperparameter& quantity) {
  JointHyperFit joint{quantity.name, algorithm, std::nullopt, ""};
  std::vector<double> n, m, y;
  for (const auto& h : per_group) {
    if (h.algorithm != algorithm || h.quantity != quantity.name) continue;
    for (const auto& [params, value] : h.optima) {
      n.push_back(params);
      m.push_back(h.replicas);
      y.push_back(value);
    }
  }
  if (n.empty()) {
    joint.skipped = not_swept(quantity);
    return joint;
  }
  try {
    joint.law = fit_joint_power_law(n, m, y, fmt::format("the optimal {} of {}", quantity.name, algorithm));
  } catch (const DataError& e) {
    joint.skipped = e.what();
  }
  return joint;
}

}  // namespace loco::sim
