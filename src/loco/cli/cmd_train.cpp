// loco train --config FILE.toml [--set section.key=value …] [--resume CHECKPOINT_DIR] [--help-config]
//
// dist.backend = "local" runs dist.replicas replicas as threads of this process; "gloo" and "nccl"
// run one replica per process, started by `loco launch --nproc M -- train …` (or torchrun, srun)
// (run/replica_runs.h); dist.elastic = true runs this process as one member of an elastic run
// (run/elastic_member_run.h), or with dist.backend = "local" every replica as a thread that is a member
// (run/local_elastic_run.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>

#include "loco/algo/make_strategy.h"
#include "loco/cli/commands.h"
#include "loco/cli/stop_on_signal.h"
#include "loco/cli/usage.h"
#include "loco/comm/c10d/rank_environment.h"
#include "loco/config/load_config.h"
#include "loco/config/strategy_checks.h"
#include "loco/config/unused_settings.h"
#include "loco/data/dataset_meta.h"
#ifdef LOCO_HAVE_MEMBERSHIP
#include "loco/run/elastic_member_run.h"
#include "loco/run/local_elastic_run.h"
#endif
#include "loco/run/replica_runs.h"
#include "loco/sim/outer_momentum_advice.h"
#include "loco/sim/slow_link_advice.h"
#include "loco/train/fault_injection.h"
#include "loco/train/progress.h"
#include "loco/train/run_directory.h"
#include "loco/train/runtime.h"
#include "loco/train/trainer.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/signal_name.h"
#include "loco/util/stop_requested.h"

namespace loco::cli {

namespace {

struct TrainArgs {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string resume;
};

// The config as given: the file, or without --config the checkpoint's; overrides on top either way.
// Derived values and checks come once the process knows how many ranks were launched.
RunConfig given_config(const TrainArgs& args) {
  if (!args.config_file.empty()) {
    RunConfig config = read_run_config(args.config_file, args.overrides);
    require_comm_codec_used(config);
    return config;
  }
  if (args.resume.empty()) {
    throw ConfigError("loco train needs --config FILE.toml (presets are in configs/), or --resume CHECKPOINT_DIR");
  }
  RunConfig config = read_checkpoint_config(args.resume);
  // The run goes on in the directory its checkpoint lies in. Its config's train.out_dir may be relative to
  // another working directory, or name where the run was before it moved: the run was resumed there, a second
  // run beside the first, and a later checkpoint of the first went unseen.
  if (const auto dir = run_directory_of(args.resume, config.dist.elastic)) config.train.out_dir = dir->string();
  const std::int64_t written_replicas = config.dist.replicas, written_stages = config.dist.stages;
  const std::string written_data = config.data.dir;
  for (const auto& assignment : args.overrides) apply_override(config, assignment);
  // Checkpoints hold data.dir as the run resolved it (Trainer::set_up), but those of earlier versions hold it as
  // given: a relative path was looked up from the resume's working directory, and found other data there, or
  // none ("prepare them", for data that exist).
  std::error_code unreadable;
  if (config.data.dir == written_data && std::filesystem::path(written_data).is_relative() &&
      !std::filesystem::exists(written_data, unreadable)) {
    throw ConfigError(fmt::format(
        "checkpoint {} gives data.dir = \"{}\", a path relative to the directory its run was started in, and "
        "{} holds no such directory. Resume from the directory the run was started in, or give the data's place "
        "with --set data.dir=…",
        args.resume, written_data, std::filesystem::current_path(unreadable).string()));
  }
  // A checkpoint's config holds both its token budget and the steps resolved from it: a new length given by one
  // of them replaces the other (before: every --set train.tokens was refused as disagreeing with the old steps,
  // the very change the "already at step" message suggests). Both given are checked together, as in a config.
  const auto sets = [&](const std::string& key) {
    return std::any_of(args.overrides.begin(), args.overrides.end(),
                       [&](const std::string& assignment) { return assignment.rfind(key + "=", 0) == 0; });
  };
  if (sets("train.tokens") && !sets("train.steps")) config.train.steps = 0;
  if (sets("train.steps") && !sets("train.tokens")) config.train.tokens = 0;
  // A static run resumes with the replicas and stages it has parts for: said first, before what the change
  // also breaks (the checkpoint's micro-batch, resolved for its replica count, was named instead).
  const std::tuple<const char*, std::int64_t, std::int64_t> counts[] = {
      {"dist.replicas", config.dist.replicas, written_replicas}, {"dist.stages", config.dist.stages, written_stages}};
  for (const auto& [key, given, written] : counts) {
    if (config.dist.elastic || given == written) continue;
    throw ConfigError(
        fmt::format("checkpoint {} was written with {} = {}, but --set gives {}: each replica and stage "
                    "resumes from its own part of it. Resume with {} = {}, or start a new run from its "
                    "exported weights (loco export)",
                    args.resume, key, written, given, key, written));
  }
  return config;
}

// How to continue a run stopped at `checkpoint`, as it was started (before: `loco train --resume` for every run,
// which a rank of a launched run refuses without its RANK and WORLD_SIZE).
std::string continue_command(const RunConfig& config, const std::filesystem::path& checkpoint,
                             const std::optional<comm::RankEnvironment>& environment) {
  const std::string resume = "train --resume " + checkpoint.string();
  if (config.dist.elastic && config.dist.backend != "local") {
    return fmt::format(
        "loco {} (started as this member was: with LOCO_COORDINATOR, LOCO_RUN_ID and the run's secret, "
        "or under `loco launch --elastic … -- {}`)",
        resume, resume);
  }
  if (!environment) return "loco " + resume;
  const std::string launch = fmt::format("loco launch --nproc {} -- {}", environment->local_world_size, resume);
  if (environment->local_world_size == environment->world_size) return launch;
  return fmt::format(
      "{} on every node, with its --nnodes, --node-rank and --master-addr as before (each node "
      "resumes its ranks' own checkpoints)",
      launch);
}

void print_summary(const TrainSummary& s, const std::string& continue_with) {
  if (s.stopped_by != 0 && s.last_checkpoint.empty()) {  // an elastic member stopped before it trained a step
    loco::print_unchecked(stdout, "stopped by {} at step {} in {}, before it trained a step: it wrote no checkpoint\n",
                          signal_name(s.stopped_by), s.steps, format_duration(s.elapsed_s));
    return;
  }
  if (s.stopped_by != 0) {
    loco::print_unchecked(stdout,
                          "stopped by {} after step {} ({} tokens) in {}; checkpoint: {}\ncontinue the run with: {}\n",
                          signal_name(s.stopped_by), s.steps, s.tokens, format_duration(s.elapsed_s),
                          s.last_checkpoint.string(), continue_with);
    return;
  }
  loco::print_unchecked(stdout, "trained {} steps, {} tokens in {} ({:.0f} tokens/s)\n", s.steps, s.tokens,
                        format_duration(s.elapsed_s), s.tokens_per_s);
  if (s.bytes_sent > 0) {
    loco::print_unchecked(stdout, "replica 0 sent {:.1f} MB; emulated wall clock {}\n",
                          static_cast<double>(s.bytes_sent) / 1e6, format_duration(s.sim_wall_s));
  }
  if (s.eval.tokens > 0) {
    loco::print_unchecked(stdout, "validation loss {:.4f}, perplexity {:.2f} (on {} tokens)\n", s.eval.loss,
                          s.eval.perplexity, s.eval.tokens);
  } else {
    loco::print_unchecked(stdout, "no validation loss (the data have no validation split)\n");
  }
  loco::print_unchecked(stdout, "checkpoint: {}\n", s.last_checkpoint.string());
}

// Fails when a process that runs one replica (dist.backend gloo or nccl) was not started as a rank.
comm::RankEnvironment require_launched(const std::optional<comm::RankEnvironment>& environment,
                                       const RunConfig& config) {
  if (!environment) {
    throw ConfigError(fmt::format(
        "dist.backend = \"{}\" runs one replica per process, but RANK/WORLD_SIZE are not set. Start the replicas "
        "with `loco launch --nproc {} -- train …` (or torchrun/srun), or use dist.backend = \"local\"",
        config.dist.backend, config.dist.replicas * config.dist.stages));
  }
  return *environment;
}

// Valid settings that loco's own measurements show hurting (sim/outer_momentum_advice.h), and settings the run
// never reads (config/unused_settings.h): said once, before training, and the run goes on.
void advise(RunConfig config) {
  // The device "auto" trains on is known here: a setting only CUDA reads is judged on it.
  if (config.train.device == "auto") config.train.device = resolve_device("auto", "train.device").str();
  for (const std::string& note : unused_settings(config)) loco::print_unchecked(stderr, "loco train: note: {}\n", note);
  // The vocabulary the data will give the model (the trainer resolves it; here only the advice's estimate
  // counts with it). Data that cannot be read are the trainer's to report.
  if (config.model.vocab_size == 0) {
    try {
      config.model.vocab_size = data::read_dataset_meta(config.data.dir).vocab_size;
    } catch (const Error&) {
    }
  }
  for (const auto& warning : {sim::outer_momentum_warning(config), sim::slow_link_warning(config)}) {
    if (warning) loco::print_unchecked(stderr, "loco train: warning: {}\n", *warning);
  }
}

// A run stopped by a signal (note "graceful-stop") ends with the conventional status 128 + its number, on every
// rank, so that a launcher or scheduler sees that it did not finish.
void end_stopped_run(const TrainSummary& summary) {
  if (summary.stopped_by != 0) throw CLI::RuntimeError(128 + summary.stopped_by);
}

// A member of an elastic run: it finds its coordinator, not its rank, in the environment.
void run_elastic(const TrainOptions& options) {
  loco::print_unchecked(stderr, "resolved config:\n{}\n", to_toml(options.config));
#ifdef LOCO_HAVE_MEMBERSHIP
  const std::optional<TrainSummary> summary = options.config.dist.backend == "local"
                                                  ? run::train_local_elastic(options)
                                                  : run::train_elastic_member(options);
  if (!summary) return;
  print_summary(*summary, continue_command(options.config, summary->last_checkpoint, std::nullopt));
  end_stopped_run(*summary);
#else
  throw ConfigError("dist.elastic = true needs a loco built with cpp-httplib (install libcpp-httplib-dev and "
                    "rebuild; docs/build.md)");
#endif
}

// LOCO_COORDINATOR names a coordinator that only an elastic member of its own process joins: a run that joins none
// (dist.elastic = false, or dist.backend = "local", whose replicas are threads under a coordinator of their own)
// trained alone beside it without a word, its member name and secret unused.
void refuse_a_coordinator_it_would_not_join(const RunConfig& config) {
  const char* coordinator = std::getenv("LOCO_COORDINATOR");
  if (coordinator == nullptr || *coordinator == '\0' || (config.dist.elastic && config.dist.backend != "local")) return;
  throw ConfigError(fmt::format(
      "LOCO_COORDINATOR={} is set, but this run joins no coordinator: {}. Set dist.elastic = true and dist.backend = "
      "\"gloo\" to join it as a member, or unset LOCO_COORDINATOR",
      coordinator,
      config.dist.elastic ? "with dist.backend = \"local\" its replicas are threads under a coordinator of their own"
                          : "dist.elastic = false"));
}

// Note "config-is-data" (config/load_config.h): the rank environment is read here, once, and its
// WORLD_SIZE completes dist.replicas = 0.
void run_train(const TrainArgs& args) {
  keep_freed_memory_in_heap();  // note "allocator": before any thread of the run (replicas, heartbeats) starts
  TrainOptions options;
  options.config = given_config(args);
  refuse_a_coordinator_it_would_not_join(options.config);
  // A malformed LOCO_FAULT is refused before anything starts (an elastic member read it only once it had joined,
  // so without a coordinator it waited without a word).
  FaultInjection::from_environment();
  if (!args.resume.empty()) options.resume_from = args.resume;
  options.make_strategy = make_strategy;
  // Note "graceful-stop": the first SIGINT, SIGTERM or SIGHUP stops the run where its replicas meet (an elastic
  // member: after its current step, and it leaves its quorum), with a checkpoint; a second one ends the
  // process at once.
  const bool elastic = options.config.dist.elastic;
  const StopOnSignal stop_on_signal([elastic](int signal) {
    loco::print_unchecked(
        stderr,
        "loco train: {} received: stopping after the next step{}, with a checkpoint (a second "
        "signal stops at once, without one)\n",
        signal_name(signal),
        elastic ? " and leaving the run (members of other processes go on)" : " where the replicas meet");
  });
  options.stop_requested = [&stop_on_signal] { return stop_on_signal.received(); };
  if (elastic) {
    complete_run_config(options.config);
    advise(options.config);
    return run_elastic(options);
  }
  if (options.config.dist.backend == "local") {
    complete_run_config(options.config);
    advise(options.config);
    const TrainSummary summary = run::train_local_replicas(options);
    print_summary(summary, continue_command(options.config, summary.last_checkpoint, std::nullopt));
    return end_stopped_run(summary);
  }
  // The config is checked first (its errors are the likelier mistake), then the launcher's variables.
  const auto environment = comm::rank_environment_from_env();
  complete_run_config(options.config, environment ? environment->world_size : 1);
  // Advice after the launch check: a run of many ranks started without them would be advised as a lone replica.
  const comm::RankEnvironment launched = require_launched(environment, options.config);
  if (launched.rank == 0) advise(options.config);
  const TrainSummary summary = run::train_rank(options, launched);
  if (environment->rank == 0)
    print_summary(summary, continue_command(options.config, summary.last_checkpoint, environment));
  end_stopped_run(summary);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model: one replica, or several (dist.*) as threads or ranks");
  set_example(cmd, "loco train --config configs/brown.toml --set optim.lr=1e-3");
  cmd->add_option("--config", args->config_file, "TOML config (see configs/)")->check(path_given());
  cmd->add_option("--set", args->overrides, "override a key: --set section.key=value (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--resume", args->resume,
                  "continue from a checkpoint directory (OUT_DIR/checkpoints/step_N; replica 0's for several)")
      ->check(path_given());
  cmd->add_flag_callback(
      "--help-config",
      [] {
        fmt::print("{}", describe_config_keys());
        throw CLI::Success();
      },
      "list every config key with its type, default and meaning");
  cmd->callback([args] {
    try {
      run_train(*args);
    } catch (const StopRequested& stop) {  // a member stopped before its run began (waiting to join)
      loco::print_unchecked(stderr, "loco train: {}; nothing was trained or written\n", stop.what());
      throw CLI::RuntimeError(128 + stop.signal());
    }
  });
}

}  // namespace loco::cli
