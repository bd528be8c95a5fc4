#include "loco/sim/fit_report.h"

#include <fmt/format.h>

#include <map>

namespace loco::sim {

namespace {

std::string percent(double fraction) { return fmt::format("{:.2f}%", fraction * 100); }

template <typename Law>
std::string quality_line(const FittedForm<Law>& f) {
  std::string held_out =
      f.holdout.mean_abs_relative_error
          ? fmt::format("{} at N = {:.4g}", percent(*f.holdout.mean_abs_relative_error), f.holdout.params)
          : "n/a (" + f.holdout.note + ")";
  return fmt::format("  rms log residual {:.4f}, max |error| {}, leave-one-out error {}\n", f.quality.rms_log_residual,
                     percent(f.quality.max_abs_relative_error), held_out);
}

std::string holdout_cell(const HyperHoldOut& h) {
  return h.mean_abs_relative_error ? percent(*h.mean_abs_relative_error) : "n/a (" + h.note + ")";
}

nlohmann::json holdout_json(const HyperHoldOut& h) {
  if (h.mean_abs_relative_error) return {{"mean_abs_relative_error", *h.mean_abs_relative_error}};
  return {{"note", h.note}};
}

std::string optional_cell(const std::optional<double>& v, const char* format = "{:.4g}") {
  return v ? fmt::format(fmt::runtime(format), *v) : "-";
}

nlohmann::json residuals_json(const std::vector<Residual>& residuals) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : residuals) {
    out.push_back({{"params", r.params}, {"replicas", r.replicas}, {"loss", r.loss}, {"predicted", r.predicted}});
  }
  return out;
}

template <typename Law>
nlohmann::json form_json(const FittedForm<Law>& f, nlohmann::json parameters) {
  if (!f.law) return {{"skipped", f.skipped}, {"points", f.points}};
  nlohmann::json holdout = {{"params", f.holdout.params}, {"predictions", residuals_json(f.holdout.predictions)}};
  if (f.holdout.mean_abs_relative_error)
    holdout["mean_abs_relative_error"] = *f.holdout.mean_abs_relative_error;
  else
    holdout["note"] = f.holdout.note;
  return {{"parameters", parameters},
          {"points", f.points},
          {"rms_log_residual", f.quality.rms_log_residual},
          {"max_abs_relative_error", f.quality.max_abs_relative_error},
          {"residuals", residuals_json(f.quality.residuals)},
          {"leave_one_out_largest_n", holdout}};
}

}  // namespace

std::string format_fit_report(const FitReport& r) {
  std::map<std::string, int> per_algorithm;
  for (const auto& p : r.data) per_algorithm[p.algorithm]++;
  std::string counts;
  for (const auto& [name, count] : per_algorithm)
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", count, name);
  std::string out = fmt::format(
      "{} results ({}); the loss laws fit the best run of each of the {} "
      "(algorithm, M, N) cells\n\nPer-group power laws  L = A·N^α\n",
      r.data.size(), counts, r.cells.size());
  for (const auto& g : r.groups) {
    out += fmt::format("{:<14} ", group_label(g.algorithm, g.replicas));
    if (!g.form.law) {
      out += "skipped: " + g.form.skipped + "\n";
      continue;
    }
    out += fmt::format("{} points  A = {:.5g}  α = {:.5f}\n", g.form.points, g.form.law->A, g.form.law->alpha);
    out += quality_line(g.form);
  }
  out += fmt::format("\nJoint  L = A·N^α·M^β  ({})\n", r.joint_algorithm.empty() ? "-" : r.joint_algorithm);
  if (r.joint.law) {
    out += fmt::format("{} points  A = {:.5g}  α = {:.5f}  β = {:.5f}\n", r.joint.points, r.joint.law->A,
                       r.joint.law->alpha, r.joint.law->beta);
    out += quality_line(r.joint);
  } else {
    out += "skipped: " + r.joint.skipped + "\n";
  }
  out += fmt::format("\nL = A·N^(α+β·M) + C  (Huber δ = {:g} on log values, BFGS from {} random starts)\n",
                     r.additive_options.huber_delta, r.additive_options.starts);
  if (r.additive.law) {
    const auto& f = *r.additive.law;
    out += fmt::format(
        "{} points  A = {:.5g}  α = {:.5f}  β = {:.6f}  C = {:.5g}  ({} of {} starts reached "
        "the best optimum)\n",
        r.additive.points, f.law.A, f.law.alpha, f.law.beta, f.law.C, f.starts_at_optimum, f.starts);
    out += quality_line(r.additive);
  } else {
    out += "skipped: " + r.additive.skipped + "\n";
  }
  out += "\nOptimal hyperparameters  y* = A·N^α (best run at each size; held out: the law refitted without the "
         "largest N, its error there)\n";
  std::map<std::string, std::string> skipped;  // reason -> groups
  for (const auto& h : r.hyper) {
    const std::string name = fmt::format("{} of {}", h.quantity, group_label(h.algorithm, h.replicas));
    if (h.law) {
      out += fmt::format("{:<26} A = {:.5g}  α = {:.5f}  ({} sizes; held out {})\n", name, h.law->A, h.law->alpha,
                         h.optima.size(), holdout_cell(h.holdout));
    } else {
      skipped[h.skipped] += (skipped[h.skipped].empty() ? "" : ", ") + name;
    }
  }
  for (const auto& j : r.joint_hyper) {
    const std::string name = fmt::format("{} of {} across M", j.quantity, j.algorithm);
    if (j.law) {
      out += fmt::format("{:<26} A = {:.5g}  α = {:.5f}  β = {:.5f}  (y* = A·N^α·M^β; held out {})\n", name,
                         j.law->A, j.law->alpha, j.law->beta, holdout_cell(j.holdout));
    } else {
      skipped[j.skipped] += (skipped[j.skipped].empty() ? "" : ", ") + name;
    }
  }
  for (const auto& [reason, names] : skipped) out += fmt::format("not fitted ({}): {}\n", names, reason);
  if (!r.predictions.empty()) {
    out += fmt::format("\nPredictions\n{:<10} {:<14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "N", "group",
                       "per-group", "joint", "additive", "lr*", "outer_lr*", "batch*");
    for (const auto& p : r.predictions) {
      out += fmt::format("{:<10.4g} {:<14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", p.request.params,
                         group_label(p.request.algorithm, p.request.replicas), optional_cell(p.per_group),
                         optional_cell(p.joint), optional_cell(p.additive), optional_cell(p.lr),
                         optional_cell(p.outer_lr), optional_cell(p.batch));
    }
  }
  return out;
}

nlohmann::json fit_json(const FitReport& r) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : r.groups) {
    nlohmann::json params =
        g.form.law ? nlohmann::json{{"A", g.form.law->A}, {"alpha", g.form.law->alpha}} : nlohmann::json();
    groups.push_back({{"algorithm", g.algorithm}, {"replicas", g.replicas}, {"fit", form_json(g.form, params)}});
  }
  nlohmann::json joint_params;
  if (r.joint.law) joint_params = {{"A", r.joint.law->A}, {"alpha", r.joint.law->alpha}, {"beta", r.joint.law->beta}};
  nlohmann::json additive_params;
  if (r.additive.law) {
    const auto& f = *r.additive.law;
    additive_params = {{"A", f.law.A},
                       {"alpha", f.law.alpha},
                       {"beta", f.law.beta},
                       {"C", f.law.C},
                       {"huber_objective", f.objective},
                       {"starts", f.starts},
                       {"starts_at_optimum", f.starts_at_optimum}};
  }
  nlohmann::json hyper = nlohmann::json::array();
  for (const auto& h : r.hyper) {
    nlohmann::json entry = {{"quantity", h.quantity}, {"algorithm", h.algorithm}, {"replicas", h.replicas}};
    if (h.law) {
      entry["A"] = h.law->A;
      entry["alpha"] = h.law->alpha;
      entry["optima"] = h.optima;
      entry["leave_one_out_largest_n"] = holdout_json(h.holdout);
    } else {
      entry["skipped"] = h.skipped;
    }
    hyper.push_back(entry);
  }
  for (const auto& j : r.joint_hyper) {
    nlohmann::json entry = {{"quantity", j.quantity}, {"algorithm", j.algorithm}, {"replicas", "all"}};
    if (j.law) {
      entry["A"] = j.law->A;
      entry["alpha"] = j.law->alpha;
      entry["beta"] = j.law->beta;
      entry["optima"] = j.optima;
      entry["leave_one_out_largest_n"] = holdout_json(j.holdout);
    } else {
      entry["skipped"] = j.skipped;
    }
    hyper.push_back(entry);
  }
  nlohmann::json predictions = nlohmann::json::array();
  auto value = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& p : r.predictions) {
    predictions.push_back({{"params", p.request.params},
                           {"algorithm", p.request.algorithm},
                           {"replicas", p.request.replicas},
                           {"per_group", value(p.per_group)},
                           {"joint", value(p.joint)},
                           {"additive", value(p.additive)},
                           {"lr", value(p.lr)},
                           {"outer_lr", value(p.outer_lr)},
                           {"batch", value(p.batch)}});
  }
  return {{"points", r.data.size()},
          {"cells", r.cells.size()},
          {"joint_algorithm", r.joint_algorithm},
          {"per_group", groups},
          {"joint", form_json(r.joint, joint_params)},
          {"additive", form_json(r.additive, additive_params)},
          {"huber_delta", r.additive_options.huber_delta},
          {"optimal_hyperparameters", hyper},
          {"predictions", predictions}};
}

}  // namespace loco::sim
