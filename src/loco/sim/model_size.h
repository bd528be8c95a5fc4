// Parameter count of a Llama model from the [model] section of a loco config (hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
// tie_word_embeddings), under one of two conventions:
//   total          every parameter, the token embedding and a separate lm_head included
//                  (the Chinchilla / DiLoCo scaling-law convention; the default)
//   non-embedding  without embed_tokens and lm_head (the Kaplan et al. convention)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <toml.hpp>

namespace loco::sim {

enum class ParamConvention { kTotal, kNonEmbedding };

// "total" or "non-embedding"; throws ConfigError otherwise.
ParamConvention parse_param_convention(const std::string& name);
const char* param_convention_name(ParamConvention convention);

struct LlamaShape {
  std::int64_t hidden = 0;
  std::int64_t intermediate = 0;  // 0 in the file means 32·ceil(8·hidden/3/32)
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // defaults to heads
  std::int64_t vocab = 0;
  bool tied = false;
};

// Reads [model]; other sections and other [model] keys are ignored. Throws ConfigError naming the
// file and the key that is missing or impossible. `source` names the file in messages.
LlamaShape llama_shape_from_toml(const toml::value& root, const std::string& source);
LlamaShape read_llama_shape(const std::filesystem::path& config_toml);

double count_parameters(const LlamaShape& shape, ParamConvention convention);

}  // namespace loco::sim
