#include "loco/sim/model_size.h"

#include "loco/sim/toml_lookup.h"
#include "loco/util/error.h"

namespace loco::sim {

namespace {

std::int64_t required(const toml::value& root, const char* key, const std::string& source) {
  auto v = find_integer(root, "model", key, source);
  if (!v) {
    throw ConfigError(
        fmt::format("{}: [model] {} is missing; a parameter count needs it (or give "
                    "--params and --layers instead of a config).",
                    source, key));
  }
  return *v;
}

void require(bool ok, const std::string& source, const std::string& what) {
  if (!ok) throw ConfigError(fmt::format("{}: [model] {}; fix the model section.", source, what));
}

}  // namespace

ParamConvention parse_param_convention(const std::string& name) {
  if (name == "total") return ParamConvention::kTotal;
  if (name == "non-embedding") return ParamConvention::kNonEmbedding;
  throw ConfigError(
      fmt::format("unknown parameter convention '{}'; use total (embeddings included) "
                  "or non-embedding.",
                  name));
}

const char* param_convention_name(ParamConvention convention) {
  return convention == ParamConvention::kTotal ? "total" : "non-embedding";
}

LlamaShape llama_shape_from_toml(const toml::value& root, const std::string& source) {
  LlamaShape s;
  s.hidden = required(root, "hidden_size", source);
  s.layers = required(root, "num_hidden_layers", source);
  s.heads = required(root, "num_attention_heads", source);
  s.vocab = required(root, "vocab_size", source);
  s.intermediate = find_integer(root, "model", "intermediate_size", source).value_or(0);
  s.kv_heads = find_integer(root, "model", "num_key_value_heads", source).value_or(s.heads);
  s.tied = find_bool(root, "model", "tie_word_embeddings", source).value_or(false);
  require(s.hidden > 0 && s.layers > 0 && s.heads > 0 && s.vocab > 0, source,
          fmt::format("hidden_size ({}), num_hidden_layers ({}), num_attention_heads ({}) and "
                      "vocab_size ({}) must be positive",
                      s.hidden, s.layers, s.heads, s.vocab));
  require(s.hidden % s.heads == 0, source,
          fmt::format("hidden_size {} is not a multiple of num_attention_heads {}", s.hidden, s.heads));
  require(s.kv_heads > 0 && s.heads % s.kv_heads == 0, source,
          fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}", s.heads, s.kv_heads));
  require(s.intermediate >= 0, source, "intermediate_size must be 0 (automatic) or positive");
  if (s.intermediate == 0) s.intermediate = 32 * ((8 * s.hidden + 95) / 96);  // 32·ceil(8h/3/32)
  return s;
}

LlamaShape read_llama_shape(const std::filesystem::path& config_toml) {
  return llama_shape_from_toml(read_toml(config_toml), config_toml.string());
}

double count_parameters(const LlamaShape& s, ParamConvention convention) {
  const double hidden = static_cast<double>(s.hidden);
  const double kv_width = static_cast<double>(s.kv_heads) * (s.hidden / s.heads);
  const double attention = 2 * hidden * hidden + 2 * hidden * kv_width;    // q, o; k, v
  const double mlp = 3 * hidden * static_cast<double>(s.intermediate);     // gate, up, down
  const double per_layer = attention + mlp + 2 * hidden;                   // two RMSNorms
  const double body = static_cast<double>(s.layers) * per_layer + hidden;  // + final norm
  const double embeddings = static_cast<double>(s.vocab) * hidden * (s.tied ? 1 : 2);
  return convention == ParamConvention::kTotal ? body + embeddings : body;
}

}  // namespace loco::sim
