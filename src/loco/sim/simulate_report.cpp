#include "loco/sim/simulate_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "loco/sim/gnuplot.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco::sim {

namespace {

std::string percent(double fraction) { return fmt::format("{:g}%", fraction * 100); }

std::string gbps_cell(const std::optional<double>& bps) {
  if (!bps) return "never";
  if (*bps == 0) return "any";
  return fmt::format("{:.4g}", *bps / 1e9);
}

nlohmann::json gbps_json(const std::optional<double>& bps) {
  return bps ? nlohmann::json(*bps / 1e9) : nlohmann::json(nullptr);
}

// "dp", or "dp [analytic]" when several timing models are compared.
std::string curve_label(const AlgorithmSpec& algorithm, TimingModel model, std::size_t models) {
  return models > 1 ? fmt::format("{} [{}]", algorithm.label(), timing_model_name(model)) : algorithm.label();
}

// The schedule model's replays of `replays_each` utilisations per algorithm, bounded together as one replay is
// alone (hours could be asked for: 10,000 sweep points, or 50 targets of an H of 10^5).
void require_bounded_replays(const SimulationRequest& r, double replays_each, const std::string& what) {
  if (std::find(r.models.begin(), r.models.end(), TimingModel::kSchedule) == r.models.end()) return;
  double total = 0;
  for (const auto& a : r.algorithms) {
    const double one = schedule_layer_steps(r.scenario, a);
    if (one > kMaxReplayLayerSteps) return;  // simulate_schedule refuses that replay, naming it
    total += one * replays_each;
  }
  if (total > kMaxTotalLayerSteps) {
    throw ConfigError(
        fmt::format("{} with the schedule model replays {:.3g} layer-steps ({} algorithm(s), {:g} "
                    "replays each), beyond the {:.0e} that take about a minute: use --model analytic, "
                    "or fewer algorithms, targets or sweep points, or a smaller H",
                    what, total, r.algorithms.size(), replays_each, kMaxTotalLayerSteps));
  }
}

void validate_request(const SimulationRequest& r) {
  validate(r.scenario);
  for (const auto& a : r.algorithms) validate(a, r.scenario);
  if (r.bandwidth_bps) validate_inter_bandwidth(*r.bandwidth_bps);
  for (double t : r.targets) {
    if (!(t > 0 && t < 1)) {
      throw ConfigError(
          fmt::format("target utilisation {}% is outside (0%, 100%); give targets such as "
                      "--targets 50,90,99.",
                      t * 100));
    }
  }
  if (r.algorithms.empty() || r.models.empty()) {
    throw ConfigError("nothing to simulate: give at least one algorithm and one timing model.");
  }
  require_bounded_replays(r, static_cast<double>(r.targets.size()) * kReplaysPerTarget + (r.bandwidth_bps ? 1 : 0),
                          "finding the bandwidth of each target");
}

}  // namespace

SimulationReport run_simulation(const SimulationRequest& request) {
  validate_request(request);
  SimulationReport report{request, {}};
  for (TimingModel model : request.models) {
    for (const auto& algorithm : request.algorithms) {
      AlgorithmOutcome o{algorithm, model, std::nullopt, {}};
      if (request.bandwidth_bps) {
        o.utilisation = utilisation_at(request.scenario, algorithm, model, *request.bandwidth_bps).utilisation;
      }
      for (double target : request.targets) {
        o.bandwidth_bps.push_back(bandwidth_for_utilisation(request.scenario, algorithm, model, target));
      }
      report.outcomes.push_back(o);
    }
  }
  return report;
}

std::string format_simulation_table(const SimulationReport& report) {
  const auto& r = report.request;
  const auto& s = r.scenario;
  std::string out = fmt::format(
      "{:.4g} parameters in {} layers, {:.4g} s per step (forward {:.0f}%), {} workers in {} "
      "replicas, {:g} bits per value\n"
      "inter-replica latency {:g} s; intra-replica link {:.4g} Gbit/s, latency {:g} s\n\n",
      s.params, s.layers, s.step_time_s, s.forward_share * 100, s.workers, s.replicas, s.bits, s.inter.latency_s,
      s.intra.bandwidth_bps / 1e9, s.intra.latency_s);
  std::size_t width = 9;
  for (const auto& o : report.outcomes)
    width = std::max(width, curve_label(o.algorithm, o.model, r.models.size()).size());
  std::string header = fmt::format("{:<{}}", "algorithm", width);
  if (r.bandwidth_bps) header += fmt::format("  {:>14}", fmt::format("util@{:g}G", *r.bandwidth_bps / 1e9));
  for (double t : r.targets) header += fmt::format("  {:>9}", percent(t));
  out += header + "\n";
  for (const auto& o : report.outcomes) {
    std::string line = fmt::format("{:<{}}", curve_label(o.algorithm, o.model, r.models.size()), width);
    if (o.utilisation) line += fmt::format("  {:>14}", fmt::format("{:.1f}%", *o.utilisation * 100));
    for (const auto& b : o.bandwidth_bps) line += fmt::format("  {:>9}", gbps_cell(b));
    out += line + "\n";
  }
  out +=
      "\nColumns with a percentage: inter-replica bandwidth (Gbit/s) needed for that compute "
      "utilisation; 'never' means latency or the inner reduction alone costs more.\n";
  return out;
}

nlohmann::json scenario_json(const Scenario& s) {
  return {{"params", s.params},
          {"layers", s.layers},
          {"step_time_s", s.step_time_s},
          {"forward_share", s.forward_share},
          {"workers", s.workers},
          {"replicas", s.replicas},
          {"bits", s.bits},
          {"inter_latency_s", s.inter.latency_s},
          {"intra_bandwidth_gbps", s.intra.bandwidth_bps / 1e9},
          {"intra_latency_s", s.intra.latency_s}};
}

nlohmann::json simulation_json(const SimulationReport& report) {
  const auto& r = report.request;
  nlohmann::json results = nlohmann::json::array();
  for (const auto& o : report.outcomes) {
    nlohmann::json needed = nlohmann::json::array();
    for (std::size_t i = 0; i < r.targets.size(); ++i) {
      needed.push_back({{"utilisation", r.targets[i]}, {"bandwidth_gbps", gbps_json(o.bandwidth_bps[i])}});
    }
    nlohmann::json entry = {{"label", o.algorithm.label()},
                            {"model", timing_model_name(o.model)},
                            {"inner_steps", o.algorithm.inner_steps},
                            {"fragments", o.algorithm.fragments},
                            {"overlap_steps", o.algorithm.overlap_steps},
                            {"bits", o.algorithm.exchange_bits(r.scenario)},
                            {"bandwidth_needed", needed}};
    if (o.utilisation) entry["utilisation"] = *o.utilisation;
    results.push_back(entry);
  }
  nlohmann::json out = {{"scenario", scenario_json(r.scenario)}, {"results", results}};
  if (r.bandwidth_bps) out["bandwidth_gbps"] = *r.bandwidth_bps / 1e9;
  return out;
}

void require_bounded_sweep(const SimulationRequest& request, int points) {
  require_bounded_replays(request, points, "the sweep");
}

Sweep run_sweep(const SimulationRequest& request, double low_bps, double high_bps, int points) {
  validate_request(request);
  require_bounded_sweep(request, points);
  Sweep sweep{log_spaced(low_bps, high_bps, points), {}, {}};
  for (TimingModel model : request.models) {
    for (const auto& algorithm : request.algorithms) {
      sweep.curves.push_back(curve_label(algorithm, model, request.models.size()));
      std::vector<double> curve;
      for (double bps : sweep.bandwidth_bps) {
        curve.push_back(utilisation_at(request.scenario, algorithm, model, bps).utilisation);
      }
      sweep.utilisation.push_back(curve);
    }
  }
  return sweep;
}

std::string sweep_csv(const Sweep& sweep) {
  std::string out = "bandwidth_gbps";
  for (const auto& c : sweep.curves) out += ",\"" + c + "\"";
  out += "\n";
  for (std::size_t i = 0; i < sweep.bandwidth_bps.size(); ++i) {
    out += fmt::format("{:.6g}", sweep.bandwidth_bps[i] / 1e9);
    for (const auto& curve : sweep.utilisation) out += fmt::format(",{:.6f}", curve[i]);
    out += "\n";
  }
  return out;
}

std::pair<fs::path, fs::path> write_sweep(const Sweep& sweep, const fs::path& dir, const std::string& title) {
  ensure_writable_directory(dir, "--sweep directory");
  fs::path csv = dir / "utilisation.csv", png = dir / "utilisation.png";
  write_file_atomic(csv, sweep_csv(sweep));
  std::string script = fmt::format(
      "set terminal pngcairo size 1000,640 noenhanced\nset output output\n"
      "set title {}\nset xlabel \"inter-replica bandwidth (Gbit/s)\"\n"
      "set ylabel \"compute utilisation (%)\"\nset logscale x\nset yrange [0:100]\n"
      "set grid\nset key bottom right\nset datafile separator \",\"\n$sweep << EOD\n{}EOD\n",
      gnuplot_quote(title), sweep_csv(sweep));
  std::string plot = "plot";
  for (std::size_t c = 0; c < sweep.curves.size(); ++c) {
    plot += fmt::format("{} $sweep using 1:(100*${}) skip 1 with lines linewidth 2 title {}", c == 0 ? "" : ",", c + 2,
                        gnuplot_quote(sweep.curves[c]));
  }
  try {
    draw_chart(script + plot + "\n", png);
  } catch (const Error&) {
    std::error_code ignored;
    fs::remove(csv, ignored);  // the sweep is its table and its chart, or nothing
    throw;
  }
  return {csv, png};
}

}  // namespace loco::sim
