// loco export --checkpoint DIR --out DIR: a Hugging Face Llama directory (see model/hf_export.h).
#include <fmt/format.h>

#include "loco/algo/evaluated_parameters.h"
#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/data/tokenizer.h"
#include "loco/model/hf_export.h"
#include "loco/model/weights.h"
#include "loco/train/checkpoint.h"
#include "loco/train/run_directory.h"

namespace loco::cli {

namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string out_dir;
};

void run_export(const ExportArgs& args) {
  refuse_data_and_checkpoint_directories(args.out_dir, "--out");
  const LoadedCheckpoint checkpoint = read_checkpoint(args.checkpoint, CheckpointUse::inference);
  const auto tokenizer = data::load_tokenizer(args.checkpoint);
  // Through the model, so that the weights pass the checks a model load makes (type, shape, finite values).
  const Llama model = evaluated_model(checkpoint, torch::kCPU);
  const NamedTensors parameters = model_parameters(model);
  write_hf_export(args.out_dir, hf_config_json(checkpoint.config.model, tokenizer->bos_id(), tokenizer->eos_id()),
                  parameters, *tokenizer, args.checkpoint);
  fmt::print("exported {} (step {}) to {}: config.json, model.safetensors, tokenizer files\n", args.checkpoint,
             checkpoint.state.step, args.out_dir);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "Write a checkpoint as a Hugging Face LlamaForCausalLM directory");
  set_example(cmd, "loco export --checkpoint runs/brown/checkpoints/step_600 --out hf/brown");
  cmd->add_option("--checkpoint", args->checkpoint, "checkpoint directory")->required()->check(path_given());
  cmd->add_option("--out", args->out_dir, "new directory to create")->required()->check(path_given());
  cmd->callback([args] { run_export(*args); });
}

}  // namespace loco::cli
