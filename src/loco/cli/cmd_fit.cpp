// `loco fit`: scaling laws from finished runs (CSV tables or loco run directories): per-group power
// laws, the joint forms of docs/algorithm-reference.md §3, optimal learning rate and batch against N, their
// leave-one-out errors at the largest N, predictions, and a chart.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/sim/fit_report.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"

namespace loco::cli {

namespace {

struct FitCommandOptions {
  std::vector<std::string> inputs;
  std::string count = "total";
  std::vector<std::string> predictions;
  int starts = 64;
  std::uint64_t seed = 0;
  double huber_delta = 1e-3;
  std::string joint_algorithm;
  bool json = false;
  std::string chart;
};

void run_fit(const FitCommandOptions& o) {
  sim::FitOptions options;
  options.additive = {o.starts, o.huber_delta, o.seed};
  options.joint_algorithm = o.joint_algorithm;
  for (const auto& text : o.predictions) options.predictions.push_back(sim::parse_prediction(text));
  // Each start is a full fit; the default 64 finds the best of them, and beyond ~10^4 a fit only takes hours.
  constexpr int kMostStarts = 10000;
  if (o.starts < 1 || o.starts > kMostStarts || !(o.huber_delta > 0)) {
    throw ConfigError(fmt::format("--starts must be between 1 and {} and --huber-delta positive (got {} and {}).",
                                  kMostStarts, o.starts, o.huber_delta));
  }
  // The chart and its gnuplot script are written beside each other: never into data or a checkpoint.
  if (!o.chart.empty()) {
    const std::filesystem::path beside = std::filesystem::path(o.chart).parent_path();
    refuse_data_and_checkpoint_directories(beside.empty() ? "." : beside, "--chart");
    // Before, `--chart results.csv` replaced the results with the PNG, and a chart named like an input .gp the
    // input with the script.
    for (const std::filesystem::path& written :
         {std::filesystem::path(o.chart), std::filesystem::path(o.chart).replace_extension(".gp")}) {
      for (const auto& input : o.inputs) {
        std::error_code unknown;
        if (std::filesystem::equivalent(written, input, unknown)) {
          throw ConfigError(
              fmt::format("--chart {} would write {}, which is the input {}: choose another name for "
                          "the chart (it writes the PNG and, beside it, its gnuplot script FILE.gp)",
                          o.chart, written.string(), input));
        }
      }
    }
  }
  auto points = sim::load_results(o.inputs, sim::parse_param_convention(o.count));
  sim::FitReport report = sim::fit_scaling_laws(points, options);
  if (!o.chart.empty()) sim::write_fit_chart(report, o.chart);
  if (o.json) {
    nlohmann::json json = sim::fit_json(report);
    json["param_convention"] = o.count;
    if (!o.chart.empty()) json["chart"] = o.chart;
    // Labels come from the user's files: a byte that is not UTF-8 is printed as U+FFFD, not an internal error.
    fmt::print("{}\n", json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  fmt::print("{}", sim::format_fit_report(report));
  bool any_run = std::any_of(o.inputs.begin(), o.inputs.end(),
                             [](const std::string& p) { return std::filesystem::is_directory(p); });
  if (any_run) fmt::print("\nN of run directories counts {} parameters (--count).\n", o.count);
  if (!o.chart.empty()) fmt::print("chart: wrote {}\n", o.chart);
}

}  // namespace

void add_fit_command(CLI::App& app) {
  auto options = std::make_shared<FitCommandOptions>();
  auto& o = *options;
  CLI::App* cmd = app.add_subcommand(
      "fit",
      "Fit scaling laws (loss, optimal lr, outer lr and batch against N and M) to results; predict larger runs "
      "(docs/algorithm-reference.md §3; docs/fit.md)");
  set_example(cmd, "loco fit runs/ --predict 1e9:8");
  cmd->add_option("inputs", o.inputs,
                  "Results CSV files (params,replicas,loss[,algorithm,tokens,lr,batch]), run directories, "
                  "or directories of runs")
      ->required()
      ->check(path_given());
  cmd->add_option("--count", o.count, "How N counts a run's parameters: total | non-embedding")->capture_default_str();
  cmd->add_option("--predict", o.predictions,
                  "Predict at N[:M] or N:dp, e.g. 10e9:8 (repeatable, or "
                  "comma-separated)")
      ->delimiter(',')
      ->expected(1)
      ->take_all();
  cmd->add_option("--starts", o.starts, "Random starts of the A·N^(α+βM)+C fit")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the random starts")->capture_default_str();
  cmd->add_option("--huber-delta", o.huber_delta, "Huber δ on log residuals")
      ->check(finite_number())
      ->capture_default_str();
  cmd->add_option("--joint-algorithm", o.joint_algorithm,
                  "Algorithm of the joint fits across M (default diloco when present)");
  cmd->add_flag("--json", o.json, "Print JSON instead of a report");
  cmd->add_option("--chart", o.chart, "Write a PNG of the fits over the data (needs gnuplot)")->check(path_given());
  cmd->callback([options] { run_fit(*options); });
}

}  // namespace loco::cli
