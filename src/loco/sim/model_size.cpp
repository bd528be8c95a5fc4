#include "loco/sim/model_size.h"

#include <fmt/format.h>

#include "loco/util/error.h"

namespace loco::sim {

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

double count_parameters(const ModelConfig& m, ParamConvention convention, const std::string& source) {
  const double hidden = static_cast<double>(m.hidden_size);
  const double kv_width = static_cast<double>(m.num_key_value_heads * m.head_dim());
  const double attention = 2 * hidden * hidden + 2 * hidden * kv_width;       // q, o; k, v
  const double mlp = 3 * hidden * static_cast<double>(m.intermediate_size);   // gate, up, down
  const double per_layer = attention + mlp + 2 * hidden;                      // two RMSNorms
  const double body = static_cast<double>(m.num_hidden_layers) * per_layer + hidden;  // + final norm
  if (convention == ParamConvention::kNonEmbedding) return body;
  if (m.vocab_size <= 0) {
    throw ConfigError(fmt::format("{}: model.vocab_size is 0 (take it from the data), but a total parameter count "
                                  "needs it; set model.vocab_size, or count with --count non-embedding",
                                  source));
  }
  return body + static_cast<double>(m.vocab_size) * hidden * (m.tie_word_embeddings ? 1 : 2);
}

}  // namespace loco::sim
