#include "loco/sim/scaling_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "loco/util/error.h"

namespace loco::sim {

namespace {

using Points = std::vector<FitPoint>;

std::vector<double> column(const Points& points, double FitPoint::*field) {
  std::vector<double> values;
  for (const auto& p : points) values.push_back(p.*field);
  return values;
}

std::vector<double> replica_column(const Points& points) {
  std::vector<double> values;
  for (const auto& p : points) values.push_back(p.replicas);
  return values;
}

template <typename Law>
using Predict = std::function<double(const Law&, const FitPoint&)>;

// The law's prediction at p; a DataError when it is beyond double precision (losses of 1e300 fit to a law whose
// errors were printed as inf%, with exit 0).
template <typename Law>
double finite_prediction(const Law& law, const FitPoint& p, const Predict<Law>& predict) {
  const double predicted = predict(law, p);
  const double relative = predicted / p.loss - 1;
  if (!std::isfinite(predicted) || !std::isnormal(predicted) || !std::isfinite(relative)) {
    throw DataError(
        fmt::format("the fitted law gives {:g} at N = {:g} (the loss there is {:g}): beyond double "
                    "precision. A value is probably mistyped; fix or remove that point.",
                    predicted, p.params, p.loss));
  }
  return predicted;
}

template <typename Law>
FitQuality quality_of(const Law& law, const Points& points, const Predict<Law>& predict) {
  FitQuality q;
  double sum_squares = 0;
  for (const auto& p : points) {
    const double predicted = finite_prediction(law, p, predict);
    q.residuals.push_back({p.params, p.replicas, p.loss, predicted});
    double r = std::log(predicted) - std::log(p.loss);
    sum_squares += r * r;
    q.max_abs_relative_error = std::max(q.max_abs_relative_error, std::abs(predicted / p.loss - 1));
  }
  q.rms_log_residual = std::sqrt(sum_squares / static_cast<double>(points.size()));
  return q;
}

// Fits `fit` to all points and to all but the largest N; a DataError marks the form skipped.
template <typename Law>
FittedForm<Law> fit_form(const Points& points, const std::function<Law(const Points&)>& fit,
                         const Predict<Law>& predict) {
  FittedForm<Law> form;
  form.points = static_cast<int>(points.size());
  try {
    form.law = fit(points);
    form.quality = quality_of(*form.law, points, predict);
  } catch (const DataError& e) {
    form.law.reset();
    form.skipped = e.what();
    return form;
  }
  double largest = 0;
  for (const auto& p : points) largest = std::max(largest, p.params);
  form.holdout.params = largest;
  Points smaller, held_out;
  for (const auto& p : points) (p.params < largest ? smaller : held_out).push_back(p);
  try {
    Law law = fit(smaller);
    double sum = 0;
    for (const auto& p : held_out) {
      const double predicted = finite_prediction(law, p, predict);
      form.holdout.predictions.push_back({p.params, p.replicas, p.loss, predicted});
      sum += std::abs(predicted / p.loss - 1);
    }
    form.holdout.mean_abs_relative_error = sum / static_cast<double>(held_out.size());
  } catch (const DataError& e) {
    form.holdout.note = fmt::format("without N = {:.4g}: {}", largest, e.what());
  }
  return form;
}

std::string choose_joint_algorithm(const Points& points, const std::string& requested) {
  std::set<std::string> algorithms;
  for (const auto& p : points) {
    if (p.algorithm != "dp") algorithms.insert(p.algorithm);
  }
  if (!requested.empty()) {
    if (!algorithms.count(requested)) {
      throw ConfigError(fmt::format("--joint-algorithm {}: no results of that algorithm; the data has {}.", requested,
                                    algorithms.empty() ? "only dp" : fmt::format("{}", fmt::join(algorithms, ", "))));
    }
    return requested;
  }
  if (algorithms.count("diloco")) return "diloco";
  return algorithms.empty() ? "" : *algorithms.begin();
}

// The best run (lowest loss) of each (algorithm, M, N): the loss laws describe tuned runs, as in
// the published tables ("best hyperparameters per cell").
Points best_per_cell(const Points& points) {
  std::map<std::tuple<std::string, int, double>, FitPoint> best;
  for (const auto& p : points) {
    auto key = std::make_tuple(p.algorithm, p.algorithm == "dp" ? 1 : p.replicas, p.params);
    auto it = best.find(key);
    if (it == best.end() || p.loss < it->second.loss) best[key] = p;
  }
  Points out;
  for (const auto& [key, p] : best) out.push_back(p);
  return out;
}

Prediction predict(const FitReport& report, const PredictionRequest& request) {
  Prediction out{request, {}, {}, {}, {}, {}, {}};
  for (const auto& g : report.groups) {
    bool same = g.algorithm == request.algorithm && (g.algorithm == "dp" || g.replicas == request.replicas);
    if (same && g.form.law) out.per_group = (*g.form.law)(request.params);
  }
  if (request.algorithm == report.joint_algorithm) {
    if (report.joint.law) out.joint = (*report.joint.law)(request.params, request.replicas);
    if (report.additive.law) out.additive = report.additive.law->law(request.params, request.replicas);
  }
  // The group's own law where there is one, else the law across M.
  const auto slot = [&out](const std::string& quantity) -> std::optional<double>& {
    if (quantity == kLearningRate.name) return out.lr;
    return quantity == kOuterLr.name ? out.outer_lr : out.batch;
  };
  for (const auto& j : report.joint_hyper) {
    if (j.algorithm != request.algorithm || !j.law) continue;
    slot(j.quantity) = (*j.law)(request.params, request.replicas);
  }
  for (const auto& h : report.hyper) {
    bool same = h.algorithm == request.algorithm && (h.algorithm == "dp" || h.replicas == request.replicas);
    if (!same || !h.law) continue;
    slot(h.quantity) = (*h.law)(request.params);
  }
  return out;
}

}  // namespace

std::string group_label(const std::string& algorithm, int replicas) {
  return algorithm == "dp" ? "dp" : fmt::format("{} M={}", algorithm, replicas);
}

PredictionRequest parse_prediction(const std::string& text) {
  PredictionRequest r;
  auto colon = text.find(':');
  std::string size = text.substr(0, colon);
  try {
    std::size_t used = 0;
    r.params = std::stod(size, &used);
    if (used != size.size()) r.params = NAN;
  } catch (const std::exception&) {
    r.params = NAN;
  }
  if (!std::isfinite(r.params) || r.params <= 0) {
    throw ConfigError(
        fmt::format("--predict '{}': N must be a positive number, as in 2.4e9, 2.4e9:8 "
                    "(M = 8) or 2.4e9:dp.",
                    text));
  }
  if (colon == std::string::npos) return r;
  std::string group = text.substr(colon + 1);
  if (normalise_algorithm(group) == "dp") {
    r.algorithm = "dp";
    return r;
  }
  try {
    std::size_t used = 0;
    r.replicas = std::stoi(group, &used);
    if (used != group.size() || r.replicas < 1) throw std::invalid_argument(group);
  } catch (const std::exception&) {
    throw ConfigError(
        fmt::format("--predict '{}': after the colon give the replica count M (a whole "
                    "number ≥ 1) or dp.",
                    text));
  }
  return r;
}

FitReport fit_scaling_laws(const Points& points, const FitOptions& options) {
  if (points.empty()) throw DataError("no results to fit: give a results CSV or loco run directories.");
  FitReport report;
  report.data = points;
  report.cells = best_per_cell(points);
  report.additive_options = options.additive;
  report.joint_algorithm = choose_joint_algorithm(points, options.joint_algorithm);

  std::map<std::pair<std::string, int>, Points> groups, cells;
  for (const auto& p : points) groups[{p.algorithm, p.algorithm == "dp" ? 1 : p.replicas}].push_back(p);
  for (const auto& p : report.cells) cells[{p.algorithm, p.algorithm == "dp" ? 1 : p.replicas}].push_back(p);
  Predict<PowerLaw> by_size = [](const PowerLaw& law, const FitPoint& p) { return law(p.params); };
  for (const auto& [key, group] : groups) {
    const std::string name = group_label(key.first, key.second);
    std::function<PowerLaw(const Points&)> fit = [name](const Points& pts) {
      return fit_power_law(column(pts, &FitPoint::params), column(pts, &FitPoint::loss), "the loss of " + name);
    };
    report.groups.push_back({key.first, key.second, fit_form(cells[key], fit, by_size)});
    for (const auto& quantity : kHyperparameters) {
      report.hyper.push_back(fit_hyperparameter(group, key.first, key.second, quantity));
    }
  }

  Points joint_points;
  for (const auto& p : report.cells) {
    if (p.algorithm == report.joint_algorithm) joint_points.push_back(p);
  }
  if (report.joint_algorithm.empty()) {
    report.joint.skipped = report.additive.skipped =
        "the data has only data-parallel runs; the joint "
        "forms need runs at several replica counts";
  } else {
    const std::string what = "the loss of " + report.joint_algorithm;
    std::function<JointPowerLaw(const Points&)> joint = [what](const Points& pts) {
      return fit_joint_power_law(column(pts, &FitPoint::params), replica_column(pts), column(pts, &FitPoint::loss),
                                 what);
    };
    report.joint = fit_form(
        joint_points, joint,
        Predict<JointPowerLaw>([](const JointPowerLaw& law, const FitPoint& p) { return law(p.params, p.replicas); }));
    std::function<AdditiveFit(const Points&)> additive = [&options](const Points& pts) {
      return fit_additive_law(column(pts, &FitPoint::params), replica_column(pts), column(pts, &FitPoint::loss),
                              options.additive);
    };
    report.additive = fit_form(
        joint_points, additive,
        Predict<AdditiveFit>([](const AdditiveFit& f, const FitPoint& p) { return f.law(p.params, p.replicas); }));
  }

  if (!report.joint_algorithm.empty()) {
    for (const auto& quantity : kHyperparameters) {
      report.joint_hyper.push_back(fit_joint_hyperparameter(report.hyper, report.joint_algorithm, quantity));
    }
  }

  bool any =
      report.joint.law || report.additive.law ||
      std::any_of(report.groups.begin(), report.groups.end(), [](const GroupFit& g) { return g.form.law.has_value(); });
  if (!any) {
    throw DataError(fmt::format("no scaling law can be fitted to these {} point{}: {}", points.size(),
                                points.size() == 1 ? "" : "s", report.groups.front().form.skipped));
  }
  for (auto request : options.predictions) {
    if (request.algorithm.empty()) request.algorithm = report.joint_algorithm.empty() ? "dp" : report.joint_algorithm;
    report.predictions.push_back(predict(report, request));
  }
  return report;
}

}  // namespace loco::sim
