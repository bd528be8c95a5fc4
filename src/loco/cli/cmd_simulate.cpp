// `loco simulate`: compute utilisation of data parallel, DiLoCo, Streaming DiLoCo and NoLoCo for a
// model, a step time, R workers in M replicas and two links; the bandwidth each target utilisation
// needs; a sweep (CSV + PNG); and the calibration against the published table (--calibrate).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <tuple>
#include <utility>

#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/config/load_config.h"
#include "loco/sim/calibration_report.h"
#include "loco/sim/model_size.h"
#include "loco/sim/simulate_report.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"
#include "loco/util/parse_number.h"

namespace loco::cli {

namespace {

struct SimulateOptions {
  double params = 0;
  int layers = 0;
  std::string config;
  std::string count = "total";
  double step_time_s = 0;
  double batch_tokens = 0;
  double chip_flops = 300e12;
  double forward_share = 1.0 / 3.0;
  int workers = 0;
  int replicas = 2;
  double bandwidth_gbps = 0;
  double latency_s = 0;
  double intra_gbps = 400;
  double intra_latency_s = 1e-4;
  double bits = 16;
  std::string algorithms = "dp,diloco,streaming,streaming:tau=1,streaming:tau=1:bits=4.25,noloco";
  int inner_steps = 100;
  int fragment_layers = 3;
  int overlap_steps = 0;
  std::string targets = "50,80,90,95,99";
  std::string model = "schedule";
  bool json = false;
  std::string sweep_dir;
  std::string sweep_range = "0.1,1000";
  int sweep_points = 50;
  bool calibrate = false;
};

std::vector<double> parse_numbers(const std::string& text, const char* option) {
  std::vector<double> values;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    const auto x = parse_whole_number(item);
    if (!x) {
      throw ConfigError(
          fmt::format("{} '{}': '{}' is not a number; give comma-separated numbers.", option, text, item));
    }
    values.push_back(*x);
  }
  if (values.empty()) throw ConfigError(fmt::format("{} is empty; give comma-separated numbers.", option));
  return values;
}

std::vector<sim::TimingModel> parse_models(const std::string& name) {
  if (name == "both") return {sim::TimingModel::kSchedule, sim::TimingModel::kAnalytic};
  return {sim::parse_timing_model(name)};
}

sim::Scenario build_scenario(const SimulateOptions& o, const CLI::App& cmd) {
  sim::Scenario s;
  bool by_size = cmd.count("--params") > 0 || cmd.count("--layers") > 0;
  if (!o.config.empty() && by_size) {
    throw ConfigError("give the model either as --config FILE.toml or as --params and --layers, not both.");
  }
  if (!o.config.empty()) {
    const RunConfig config = read_config_for_planning(o.config);
    s.params = sim::count_parameters(config.model, sim::parse_param_convention(o.count), o.config);
    s.layers = static_cast<int>(config.model.num_hidden_layers);
  } else if (cmd.count("--params") > 0 && cmd.count("--layers") > 0) {
    s.params = o.params;
    s.layers = o.layers;
  } else {
    throw ConfigError(
        "no model given: pass --params N --layers L (for example --params 1e9 --layers "
        "24) or --config FILE.toml with a [model] section.");
  }
  s.replicas = o.replicas;
  s.workers = cmd.count("--workers") > 0 ? o.workers : o.replicas;
  s.forward_share = o.forward_share;
  s.bits = o.bits;
  s.inter = {0, o.latency_s};
  s.intra = {o.intra_gbps * 1e9, o.intra_latency_s};
  if (cmd.count("--step-time") > 0 && cmd.count("--batch-tokens") > 0) {
    throw ConfigError(
        "give either --step-time or --batch-tokens (which derives the step time as "
        "6·N·B/(R·Q)), not both.");
  }
  if (cmd.count("--step-time") > 0) {
    s.step_time_s = o.step_time_s;
  } else if (cmd.count("--batch-tokens") > 0) {
    if (!(o.batch_tokens > 0 && o.chip_flops > 0 && s.workers > 0)) {
      throw ConfigError(
          fmt::format("--batch-tokens ({}) and --chip-flops ({}) must be positive to "
                      "derive the step time.",
                      o.batch_tokens, o.chip_flops));
    }
    s.step_time_s = 6 * s.params * o.batch_tokens / (s.workers * o.chip_flops);
  } else {
    throw ConfigError(
        "no step time given: pass --step-time SECONDS (compute of one inner step on one "
        "worker, e.g. 0.1) or --batch-tokens B to derive it from 6·N·B/(R·Q).");
  }
  return s;
}

void print_calibration(const SimulateOptions& o, const CLI::App& cmd) {
  // Every option but --json describes a scenario of one's own, which the calibration would ignore.
  for (const CLI::Option* option : cmd.get_options()) {
    const std::string name = option->get_name();
    if (option->count() > 0 && name != "--calibrate" && name != "--json") {
      throw ConfigError(
          fmt::format("--calibrate runs the fixed scenario of the published table; drop "
                      "{} (or drop --calibrate to simulate your own).",
                      name));
    }
  }
  auto results = sim::run_calibration();
  if (o.json)
    fmt::print("{}\n", sim::calibration_json(results).dump(2));
  else
    fmt::print("{}", sim::format_calibration_table(results));
}

void run_simulate(const SimulateOptions& o, const CLI::App& cmd) {
  if (o.calibrate) return print_calibration(o, cmd);
  sim::SimulationRequest request;
  request.scenario = build_scenario(o, cmd);
  sim::AlgorithmDefaults defaults{o.inner_steps, o.fragment_layers, o.overlap_steps, 0};
  request.algorithms = sim::parse_algorithms(o.algorithms, defaults, request.scenario.layers);
  // A default that no spec of --algorithms takes would be ignored (before: accepted without a word; then also
  // where every spec gave its own, as --h 30 beside diloco:h=50).
  const auto taken = [&](bool sim::AlgorithmSpec::*took) {
    return std::any_of(request.algorithms.begin(), request.algorithms.end(),
                       [&](const sim::AlgorithmSpec& spec) { return spec.*took; });
  };
  for (const auto& [option, key, took] :
       {std::tuple{"--h", "h", &sim::AlgorithmSpec::took_inner_steps},
        std::tuple{"--tau", "tau", &sim::AlgorithmSpec::took_overlap_steps},
        std::tuple{"--fragment-layers", "fragments= and fragment_layers", &sim::AlgorithmSpec::took_fragment_layers}}) {
    if (cmd.count(option) > 0 && !taken(took)) {
      throw ConfigError(fmt::format(
          "{} is a default for the {} specs in --algorithms that leave {}= out, and --algorithms {} holds none: "
          "drop {}, or leave {}= out of a spec",
          option, std::string(option) == "--h" ? "diloco, streaming and noloco" : "streaming", key, o.algorithms,
          option, key));
    }
  }
  request.models = parse_models(o.model);
  for (double percent : parse_numbers(o.targets, "--targets")) request.targets.push_back(percent / 100);
  // Bandwidths are checked as given, in Gbit/s: converted to bit/s first, 1e300 would already be infinite.
  sim::validate_bandwidth_gbps(o.intra_gbps, "intra-replica", "--intra-bandwidth 400");
  if (cmd.count("--bandwidth") > 0) {
    sim::validate_bandwidth_gbps(o.bandwidth_gbps, "inter-replica", "--bandwidth 10");
    request.bandwidth_bps = o.bandwidth_gbps * 1e9;
  }

  // The sweep is checked before anything runs: its bounds, and the work of its replays.
  std::vector<double> range;
  if (!o.sweep_dir.empty()) {
    refuse_data_and_checkpoint_directories(o.sweep_dir, "--sweep");  // it writes its CSV, script and chart there
    range = parse_numbers(o.sweep_range, "--sweep-range");
    if (range.size() != 2) throw ConfigError("--sweep-range takes two numbers: LOW,HIGH in Gbit/s.");
    sim::validate_bandwidth_gbps(range[0], "sweep's lowest", "--sweep-range 0.1,1000");
    sim::validate_bandwidth_gbps(range[1], "sweep's highest", "--sweep-range 0.1,1000");
    sim::log_spaced(range[0] * 1e9, range[1] * 1e9, o.sweep_points);  // refuses a range or count it cannot take
    sim::require_bounded_sweep(request, o.sweep_points);
  }
  sim::SimulationReport report = sim::run_simulation(request);
  nlohmann::json json = sim::simulation_json(report);
  if (!o.sweep_dir.empty()) {
    sim::Sweep sweep = sim::run_sweep(request, range[0] * 1e9, range[1] * 1e9, o.sweep_points);
    const auto& s = request.scenario;
    auto [csv, png] =
        sim::write_sweep(sweep, o.sweep_dir,
                         fmt::format("compute utilisation: {:.3g} parameters, {} layers, {:g} s/step, {} workers in {} "
                                     "replicas",
                                     s.params, s.layers, s.step_time_s, s.workers, s.replicas));
    json["sweep"] = {{"csv", csv.string()}, {"png", png.string()}};
    if (!o.json) fmt::print("sweep: wrote {} and {}\n\n", csv.string(), png.string());
  }
  if (o.json)
    // Labels come from the user's files: a byte that is not UTF-8 is printed as U+FFFD, not an internal error.
    fmt::print("{}\n", json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  else
    fmt::print("{}", sim::format_simulation_table(report));
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto options = std::make_shared<SimulateOptions>();
  auto& o = *options;
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Compute utilisation of dp / DiLoCo / Streaming DiLoCo / NoLoCo on slow links, and the bandwidth "
      "a target utilisation needs (docs/algorithm-reference.md §3-4; docs/simulate.md)");
  set_example(cmd, "loco simulate --params 1e9 --layers 24 --step-time 0.1 --bandwidth 1");
  cmd->add_option("--params", o.params, "Parameters N exchanged by a full sync, e.g. 1e9")->check(finite_number());
  cmd->add_option("--layers", o.layers, "Transformer layers L (N is spread evenly over them)");
  CLI::Option* config =
      cmd->add_option("--config", o.config, "A loco config (TOML) whose [model] gives N and L instead")
          ->check(path_given());
  // Options that refine another are refused without it (before: read by nothing, and the user's value ignored).
  cmd->add_option("--count", o.count, "Parameter convention for --config: total | non-embedding")
      ->capture_default_str()
      ->needs(config);
  cmd->add_option("--step-time", o.step_time_s, "Compute seconds of one inner step on one worker")->check(finite_number());
  CLI::Option* batch_tokens =
      cmd->add_option("--batch-tokens", o.batch_tokens, "Global tokens per step; derives the step time as 6·N·B/(R·Q)")
          ->check(finite_number());
  cmd->add_option("--chip-flops", o.chip_flops, "Q: FLOP/s one worker sustains (with --batch-tokens)")
      ->check(finite_number())
      ->capture_default_str()
      ->needs(batch_tokens);
  cmd->add_option("--forward-share", o.forward_share, "Forward's share of a step's compute")->check(finite_number())->capture_default_str();
  cmd->add_option("--workers", o.workers, "R: workers in all (default: one per replica)");
  cmd->add_option("--replicas", o.replicas, "M: replicas (e.g. datacenters)")->capture_default_str();
  cmd->add_option("--bandwidth", o.bandwidth_gbps, "Inter-replica bandwidth in Gbit/s: also report utilisation at it")->check(finite_number());
  cmd->add_option("--latency", o.latency_s, "Inter-replica latency in seconds per collective")->check(finite_number())->capture_default_str();
  cmd->add_option("--intra-bandwidth", o.intra_gbps, "Intra-replica bandwidth in Gbit/s")->check(finite_number())->capture_default_str();
  cmd->add_option("--intra-latency", o.intra_latency_s, "Intra-replica latency in seconds")->check(finite_number())->capture_default_str();
  cmd->add_option("--bits", o.bits, "Bits per exchanged value (16: bf16)")->check(finite_number())->capture_default_str();
  cmd->add_option("--algorithms", o.algorithms,
                  "Comma-separated name[:key=value]... with names dp, diloco, streaming, noloco and "
                  "keys h, fragments, fragment_layers, tau, bits")
      ->capture_default_str();
  cmd->add_option("--h", o.inner_steps, "H: inner steps between synchronisations")
      ->check(whole_number_at_least(1))
      ->capture_default_str();
  cmd->add_option("--fragment-layers", o.fragment_layers, "Layers per Streaming DiLoCo fragment")
      ->check(whole_number_at_least(1))
      ->capture_default_str();
  cmd->add_option("--tau", o.overlap_steps, "Streaming overlap τ in steps (default for streaming specs)")
      ->check(whole_number_at_least(0))
      ->capture_default_str();
  cmd->add_option("--targets", o.targets, "Target utilisations in percent")->capture_default_str();
  cmd->add_option("--model", o.model, "Timing model: schedule | analytic | both")->capture_default_str();
  cmd->add_flag("--json", o.json, "Print JSON instead of a table");
  CLI::Option* sweep =
      cmd->add_option("--sweep", o.sweep_dir,
                      "Write DIR/utilisation.csv and DIR/utilisation.png (utilisation against bandwidth)")
          ->check(path_given());
  cmd->add_option("--sweep-range", o.sweep_range, "LOW,HIGH Gbit/s of the sweep")->capture_default_str()->needs(sweep);
  cmd->add_option("--sweep-points", o.sweep_points,
                  fmt::format("Bandwidths in the sweep (2 to {})", sim::kMaxSweepPoints))
      ->capture_default_str()
      ->needs(sweep);
  cmd->add_flag("--calibrate", o.calibrate,
                "Reproduce the published table of docs/algorithm-reference.md §4 and print the relative errors");
  cmd->callback([options, cmd] { run_simulate(*options, *cmd); });
}

}  // namespace loco::cli
