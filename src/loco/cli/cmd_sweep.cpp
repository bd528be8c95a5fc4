// `loco sweep FILE.toml`: a grid of training runs from one file, several at a time, each evaluated the
// same way, with one summary table that `loco fit` reads (sweep/sweep_plan.h, docs/sweep.md).
#include <fmt/format.h>

#include <memory>
#include <set>

#include "loco/cli/commands.h"
#include "loco/cli/stop_on_signal.h"
#include "loco/cli/usage.h"
#include "loco/sweep/sweep_plan.h"
#include "loco/sweep/sweep_runner.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/signal_name.h"

namespace loco::cli {

namespace {

struct SweepArgs {
  std::string file;
  std::string profile;
  int jobs = 0;
  bool dry_run = false;
  bool tables_only = false;
};

void run_sweep_command(const SweepArgs& args) {
  const SweepPlan plan = read_sweep_plan(args.file, args.profile);
  // Each run refuses its own train.out_dir there; the sweep's logs and summaries would still go in.
  refuse_data_and_checkpoint_directories(plan.out_dir, fmt::format("{}: out_dir", args.file));
  // A sweep's runs and tables inside a run's directory would be lost when that run is trained again (audit round
  // 11: a second sweep inside a run of the first was deleted when the first retrained it).
  refuse_run_directories(plan.out_dir, fmt::format("{}: out_dir", args.file));
  const int jobs = args.jobs > 0 ? args.jobs : plan.jobs;
  loco::print_unchecked(stdout, "sweep {}: {} run(s) of {} in {}, {} at a time, {} thread(s) each\n", args.file,
                        plan.runs.size(), plan.base.string(), plan.out_dir.string(), jobs, plan.threads);
  if (args.dry_run) {
    for (const SweepRun& run : plan.runs) {
      std::string sets;
      for (const auto& [key, value] : run.axis_values) sets += fmt::format(" {}={}", key, value);
      loco::print_unchecked(stdout, "  {}:{}{}\n", run.name, sets,
                            run.launched ? fmt::format(" (loco launch, {} ranks)", run.replicas) : "");
    }
    if (!plan.repeats.empty()) {
      std::set<std::string> cells;
      for (const SweepRun& run : plan.runs) cells.insert(run.cell);
      const auto repeats = repeats_of(plan, plan.runs.front()).size();
      loco::print_unchecked(stdout,
                            "then the best run of each of the {} cells over {} again, {} time(s) each ({} runs)\n",
                            cells.size(), fmt::join(plan.tuned, ", "), repeats, repeats * cells.size());
    }
    return;
  }
  if (args.tables_only) {
    if (!std::filesystem::is_directory(plan.out_dir)) {
      throw ConfigError(
          fmt::format("--tables-only writes the tables of the runs in {}, but it does not exist: no run "
                      "of this sweep has started. Run the sweep without --tables-only",
                      plan.out_dir.string()));
    }
    const int listed = write_sweep_summary(plan);
    loco::print_unchecked(stdout, "summary: {} run(s) with a result listed in {}; nothing was run\n", listed,
                          (plan.out_dir / "summary.csv").string());
    return;
  }
  // The first SIGINT or SIGTERM stops the runs in progress as loco train stops (at their next step, with a
  // checkpoint) and starts no other; the tables of what finished are written, and the sweep exits 128 + the
  // signal. A second signal ends the sweep at once, and its runs get SIGTERM as it dies (run_program.h).
  StoppablePrograms programs;
  const StopOnSignal stop_on_signal([&programs](int signal) {
    loco::print_unchecked(stderr,
                          "loco sweep: {} received: the runs in progress stop at their next step and no other starts; "
                          "run the same command again to go on (a second signal stops at once)\n",
                          signal_name(signal));
    programs.stop(signal);
  });
  const int failed = run_sweep(plan, {"/proc/self/exe", jobs, &programs});
  loco::print_unchecked(
      stdout, "summary: {} and {}{}\n", (plan.out_dir / "summary.csv").string(),
      (plan.out_dir / "summary.jsonl").string(),
      plan.tuned.empty() ? "" : fmt::format("; best of each cell: {}", (plan.out_dir / "cells.csv").string()));
  if (programs.stopped() != 0) throw CLI::RuntimeError(128 + programs.stopped());
  if (failed > 0) {
    throw Error(fmt::format("{} run(s) failed (their logs are named above); run the same command again to redo only "
                            "the runs without a result",
                            failed));
  }
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Run a grid of training runs from one file, evaluate each, repeat each cell's best with other seeds, and "
      "tabulate them for loco fit (docs/sweep.md)");
  set_example(cmd, "loco sweep bench/sweeps/outer-lr-brown.toml --jobs 2");
  cmd->add_option("file", args->file, "The sweep file (TOML: base, out_dir, [set], [axes]; docs/sweep.md)")
      ->required()
      ->check(path_given());
  cmd->add_option("--jobs", args->jobs,
                  fmt::format("Runs at a time, 1 to {} (default: the file's jobs, else 1)", kMaxSweepJobs))
      ->check(whole_number_at_least(1))
      ->check(number_in(1, kMaxSweepJobs));
  cmd->add_option("--profile", args->profile,
                  "Apply the file's [profile.NAME]: its settings and axes replace the file's (e.g. larger models)");
  CLI::Option* dry_run =
      cmd->add_flag("--dry-run", args->dry_run, "Check every run's config and list the runs, without running them");
  cmd->add_flag("--tables-only", args->tables_only,
                "Write the summary (and cells) tables of the runs finished so far, without running any (e.g. while "
                "the sweep runs)")
      ->excludes(dry_run);  // a dry run writes nothing: the tables were silently not written
  cmd->callback([args] { run_sweep_command(*args); });
}

}  // namespace loco::cli
