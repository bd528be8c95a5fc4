// Parameter count of a Llama model from the [model] section of a loco config, read through config/
// (the same keys, defaults and derived values as `loco train`), under one of two conventions:
//   total          every parameter, the token embedding and a separate lm_head included
//                  (the Chinchilla / DiLoCo scaling-law convention; the default)
//   non-embedding  without embed_tokens and lm_head (the Kaplan et al. convention)
#pragma once

#include <filesystem>
#include <string>

#include "loco/config/run_config.h"

namespace loco::sim {

enum class ParamConvention { kTotal, kNonEmbedding };

// "total" or "non-embedding"; throws ConfigError otherwise.
ParamConvention parse_param_convention(const std::string& name);
const char* param_convention_name(ParamConvention convention);

// The parameters of `model` (derived values resolved, as config/ leaves them). The total convention
// needs the vocabulary: ConfigError naming `source` when model.vocab_size is 0 ("take it from the
// data", which a plan does not have).
double count_parameters(const ModelConfig& model, ParamConvention convention, const std::string& source);

}  // namespace loco::sim
