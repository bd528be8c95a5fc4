// loco generate --checkpoint DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]
#include <fmt/format.h>

#include <cstdio>

#include "loco/algo/evaluated_parameters.h"
#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/data/streamed_text.h"
#include "loco/data/tokenizer.h"
#include "loco/model/generate.h"
#include "loco/train/checkpoint.h"
#include "loco/train/memory_need.h"
#include "loco/train/runtime.h"
#include "loco/util/error.h"
#include "loco/util/utf8.h"

namespace loco::cli {

namespace {

struct GenerateArgs {
  std::string checkpoint;
  std::string prompt;
  SamplingOptions sampling;
  std::string device = "cpu";
};

void run_generate(GenerateArgs args) {
  // The prompt is shown as given and encoded as the model reads text: bytes that are not UTF-8 would be shown as
  // one text and continued as another (a sentencepiece tokenizer normalises them away).
  if (const auto bad = first_invalid_utf8(args.prompt)) {
    throw ConfigError(
        fmt::format("--prompt is not UTF-8 text: byte {} (0x{:02X}) starts no valid UTF-8 sequence; give "
                    "the prompt as UTF-8 (a terminal set to another encoding sends other bytes)",
                    *bad, static_cast<unsigned char>(args.prompt[*bad])));
  }
  const LoadedCheckpoint checkpoint = read_checkpoint(args.checkpoint, CheckpointUse::inference);
  const auto tokenizer = data::load_tokenizer(args.checkpoint);
  const torch::Device device = resolve_device(args.device, "--device");
  configure_threads(checkpoint.config.train.threads, device);
  if (!device.is_cuda()) require_room_to_compute("loco generate");
  Llama model = evaluated_model(checkpoint, device);
  const std::int64_t embedded = checkpoint.config.model.vocab_size;
  if (embedded < tokenizer->vocab_size()) {
    throw CheckpointError(fmt::format("the model in {} embeds {} token ids but its tokenizer has {}: the checkpoint's "
                                      "config or tokenizer was edited. Use another checkpoint",
                                      args.checkpoint, embedded, tokenizer->vocab_size()));
  }
  args.sampling.vocabulary = tokenizer->vocab_size();  // a larger embedding's extra ids decode to nothing

  std::vector<std::int64_t> prompt{tokenizer->bos_id()};
  for (auto id : tokenizer->encode(args.prompt)) prompt.push_back(id);
  args.sampling.stop_token = tokenizer->eos_id();
  // Note "streamed-text": the text as it is made, every kTokensPerShow tokens (a long generation on a CPU takes
  // minutes), then the rest.
  constexpr std::size_t kTokensPerShow = 16;
  data::StreamedText text(*tokenizer);
  const auto as_ids = [](const std::vector<std::int64_t>& tokens) {
    return std::vector<std::uint32_t>(tokens.begin(), tokens.end());
  };
  fmt::print("{}", args.prompt);
  std::fflush(stdout);
  const auto produced = generate_tokens(model, prompt, args.sampling, device, [&](const std::vector<std::int64_t>& so_far) {
    if (so_far.size() % kTokensPerShow != 0) return;
    fmt::print("{}", text.show(as_ids(so_far), /*last=*/false));
    std::fflush(stdout);
  });
  fmt::print("{}\n", text.show(as_ids(produced), /*last=*/true));
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Sample text from a checkpoint");
  set_example(cmd, "loco generate --checkpoint runs/brown/checkpoints/step_600 --prompt \"The jury said\" --tokens 50");
  cmd->add_option("--checkpoint", args->checkpoint, "checkpoint directory")->required()->check(path_given());
  cmd->add_option("--prompt", args->prompt, "text to continue")->required();
  cmd->add_option("--tokens", args->sampling.max_new_tokens, "new tokens to generate (at most 100000)")
      ->check(whole_number_at_least(1))
      ->check(number_in(1, 100'000));
  cmd->add_option("--temperature", args->sampling.temperature, "softmax temperature; 0 is greedy")
      ->check(number_in(0, 100));
  cmd->add_option("--top-k", args->sampling.top_k, "sample from the k most likely tokens; 0: all")
      ->check(whole_number_at_least(0));
  cmd->add_option("--seed", args->sampling.seed, "sampling seed")->check(whole_number_at_least(0));
  cmd->add_option("--device", args->device, "cpu | cuda | auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->callback([args, cmd] {
    // Greedy decoding takes the most likely token: nothing is drawn, so a top-k or a seed would be ignored.
    for (const char* option : {"--top-k", "--seed"}) {
      if (args->sampling.temperature == 0 && cmd->count(option) > 0) {
        throw ConfigError(
            fmt::format("{} is read only when sampling, and --temperature 0 decodes greedily (the "
                        "most likely token each time): drop {}, or give a temperature above 0",
                        option, option));
      }
    }
    run_generate(*args);
  });
}

}  // namespace loco::cli
