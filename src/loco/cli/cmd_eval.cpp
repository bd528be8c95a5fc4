// loco eval --checkpoint DIR --data DATA_DIR [--batches N] [--batch-size B]
// Prints one JSON line: {"loss", "perplexity", "tokens", "step", "checkpoint"}.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "loco/algo/evaluated_parameters.h"
#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/data/token_dataset.h"
#include "loco/train/checkpoint.h"
#include "loco/train/evaluate.h"
#include "loco/train/memory_need.h"
#include "loco/train/resume_checks.h"
#include "loco/train/runtime.h"
#include "loco/util/error.h"

namespace loco::cli {

namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string data_dir;
  std::string split = "val";
  std::int64_t batches = 50;
  std::int64_t batch_size = 0;
  std::string device = "cpu";
};

void run_eval(const EvalArgs& args) {
  const LoadedCheckpoint checkpoint = read_checkpoint(args.checkpoint, CheckpointUse::inference);
  const auto data = data::TokenDataset::open(args.data_dir, args.split);
  require_same_tokenizer(args.data_dir, checkpoint);
  // The window is the model's: the fixes of a run's "too few tokens" (a shorter data.seq_len, fewer replicas) are
  // none here.
  const std::int64_t window = checkpoint.config.data.seq_len + 1;
  if (static_cast<std::int64_t>(data.size()) < window) {
    throw DataError(
        fmt::format("the {} split of {} has {} tokens, fewer than one window of the model's "
                    "data.seq_len + 1 = {}: evaluate the other split (--split {}), or prepare the data "
                    "again with more text or a larger --val-fraction",
                    args.split, args.data_dir, data.size(), window, args.split == "val" ? "train" : "val"));
  }
  const torch::Device device = resolve_device(args.device, "--device");
  configure_threads(checkpoint.config.train.threads, device);
  if (!device.is_cuda()) require_room_to_compute("loco eval");
  Llama model = evaluated_model(checkpoint, device);
  const std::int64_t batch = args.batch_size > 0 ? args.batch_size : checkpoint.config.train.micro_batch_size;
  // Forwards of at most the run's micro-batch, which its training held with gradients: a larger --batch-size
  // reads more windows, not more at once.
  const EvalResult r = evaluate(model, data, args.batches, batch, checkpoint.config.data.seq_len, device,
                                /*bf16_autocast=*/false, checkpoint.config.train.micro_batch_size);
  nlohmann::json line = {{"loss", r.loss},
                         {"perplexity", r.perplexity},
                         {"tokens", r.tokens},
                         {"step", checkpoint.state.step},
                         {"checkpoint", args.checkpoint},
                         {"split", args.split}};
  // A checkpoint path that is not UTF-8 (legal on Linux) is shown with U+FFFD where JSON cannot hold its bytes.
  fmt::print("{}\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint's loss and perplexity on prepared data");
  set_example(cmd, "loco eval --checkpoint runs/brown/checkpoints/step_600 --data data/brown");
  cmd->add_option("--checkpoint", args->checkpoint, "checkpoint directory")->required()->check(path_given());
  cmd->add_option("--data", args->data_dir, "directory written by `loco prepare`")->required()->check(path_given());
  cmd->add_option("--split", args->split, "split to evaluate")->check(CLI::IsMember({"val", "train"}));
  cmd->add_option("--batches", args->batches, "batches to evaluate")->check(whole_number_at_least(1));
  cmd->add_option("--batch-size", args->batch_size, "sequences per batch (0, the default: the run's micro-batch); a larger one is forwarded in pieces of the "
                  "run's micro-batch")
      ->check(whole_number_at_least(0));
  cmd->add_option("--device", args->device, "cpu | cuda | auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->callback([args] { run_eval(*args); });
}

}  // namespace loco::cli
