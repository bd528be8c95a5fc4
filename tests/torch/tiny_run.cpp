#include "torch/tiny_run.h"

#include <fmt/format.h>

#include "loco/config/load_config.h"
#include "loco/data/prepare.h"
#include "support/test_support.h"

namespace loco::test {

namespace fs = std::filesystem;

namespace {

void prepare_tiny_data(const fs::path& data_dir, const fs::path& text_dir) {
  if (fs::exists(data_dir / "meta.json")) return;
  const char* words[] = {"the", "jury", "said", "it", "did", "find", "that", "many", "of", "laws", "are", "old"};
  for (int doc = 0; doc < 8; ++doc) {
    std::string text;
    for (int i = 0; i < 400; ++i) text += fmt::format("{} ", words[(i * (doc + 3) + i / 7) % 12]);
    write_text(text_dir / fmt::format("doc{}.txt", doc), text);
  }
  data::PrepareOptions options;
  options.inputs = {text_dir};
  options.out_dir = data_dir;
  options.tokenizer = "byte";
  options.val_fraction = 0.2;
  data::prepare_dataset(options);
}

}  // namespace

RunConfig tiny_run_config(const fs::path& dir, const std::string& run_name, std::int64_t steps) {
  prepare_tiny_data(dir / "data", dir / "text");
  RunConfig c;
  c.model.hidden_size = 32;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 4;
  c.model.num_key_value_heads = 2;
  c.data.dir = (dir / "data").string();
  c.data.seq_len = 16;
  c.optim.lr = 3e-3;
  c.optim.warmup_steps = 2;
  c.train.steps = steps;
  c.train.batch_size = 4;
  c.train.micro_batch_size = 2;
  c.train.eval_every = 4;
  c.train.eval_batches = 2;
  c.train.log_every = 1;
  c.train.threads = 1;
  c.train.out_dir = (dir / run_name).string();
  resolve_derived(c);
  validate(c);
  return c;
}

}  // namespace loco::test
