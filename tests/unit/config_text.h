// A config given as text, for the config tests: a valid one to start from, and loading text (with --set
// overrides) into a RunConfig or into the ConfigError it raises.
#pragma once

#include <string>
#include <vector>

#include "loco/config/load_config.h"
#include "loco/util/error.h"
#include "support/test_support.h"

namespace loco::test {

// A run every test can take apart: a small model, its data, a schedule and a batch split in micro-batches.
inline const char* const kValidConfig = R"(
[model]
hidden_size = 96
num_hidden_layers = 3
num_attention_heads = 6
num_key_value_heads = 2

[data]
dir = "data/x"
seq_len = 64

[optim]
lr = 1e-3
schedule = "wsd"

[train]
steps = 50
batch_size = 8
micro_batch_size = 4
)";

inline RunConfig load_text(const ScratchDir& dir, const std::string& text,
                           const std::vector<std::string>& overrides = {}) {
  write_text(dir / "run.toml", text);
  return load_run_config(dir / "run.toml", overrides);
}

inline std::string config_error(const ScratchDir& dir, const std::string& text,
                                const std::vector<std::string>& overrides = {}) {
  try {
    load_text(dir, text, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace loco::test
