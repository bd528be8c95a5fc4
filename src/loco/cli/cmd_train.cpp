// loco train --config FILE.toml [--set section.key=value …] [--resume CHECKPOINT_DIR] [--help-config]
#include <fmt/format.h>

#include "loco/cli/commands.h"
#include "loco/config/load_config.h"
#include "loco/train/checkpoint.h"
#include "loco/train/progress.h"
#include "loco/train/trainer.h"
#include "loco/util/error.h"

namespace loco::cli {

namespace {

struct TrainArgs {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string resume;
};

// Without --config, a resumed run takes the checkpoint's config; overrides apply on top either way.
RunConfig resolve_config(const TrainArgs& args) {
  if (!args.config_file.empty()) return load_run_config(args.config_file, args.overrides);
  if (args.resume.empty()) {
    throw ConfigError("loco train needs --config FILE.toml (presets are in configs/), or --resume CHECKPOINT_DIR");
  }
  RunConfig config = read_checkpoint_config(args.resume);
  for (const auto& assignment : args.overrides) apply_override(config, assignment);
  resolve_derived(config);
  validate(config);
  return config;
}

void run_train(const TrainArgs& args) {
  TrainOptions options;
  options.config = resolve_config(args);
  if (!args.resume.empty()) options.resume_from = args.resume;
  fmt::print(stderr, "resolved config:\n{}\n", to_toml(options.config));
  Trainer trainer(std::move(options));
  const TrainSummary s = trainer.run();
  fmt::print("trained {} steps, {} tokens in {} ({:.0f} tokens/s)\n", s.steps, s.tokens, format_duration(s.elapsed_s),
             s.tokens_per_s);
  fmt::print("validation loss {:.4f}, perplexity {:.2f} (on {} tokens)\n", s.eval.loss, s.eval.perplexity,
             s.eval.tokens);
  fmt::print("checkpoint: {}\n", s.last_checkpoint.string());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model (single process)");
  cmd->add_option("--config", args->config_file, "TOML config (see configs/)");
  cmd->add_option("--set", args->overrides, "override a key: --set section.key=value (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--resume", args->resume, "continue from a checkpoint directory (OUT_DIR/checkpoints/step_N)");
  cmd->add_flag_callback(
      "--help-config",
      [] {
        fmt::print("config keys (TOML sections [model] [data] [optim] [train]; override with --set key=value):\n{}",
                   describe_config_keys());
        throw CLI::Success();
      },
      "list every config key with its type, default and meaning");
  cmd->callback([args] { run_train(*args); });
}

}  // namespace loco::cli
