// `loco export`: a directory that transformers.LlamaForCausalLM.from_pretrained loads unchanged:
//   config.json        LlamaConfig keys (architectures, model_type "llama", sizes, rope_theta, …)
//   model.safetensors  parameters under their HF names (no lm_head when tied), float32
//   tokenizer.json     the tokenizer for Hugging Face's `tokenizers` (AutoTokenizer), with tokenizer_config.json
//                      and special_tokens_map.json (data/hf_tokenizer.h)
//   tokenizer.model    the sentencepiece model, when the data used one (for sentencepiece's own readers)
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "loco/config/run_config.h"
#include "loco/data/tokenizer.h"
#include "loco/io/safetensors.h"

namespace loco {

nlohmann::json hf_config_json(const ModelConfig& model, std::int64_t bos_id, std::int64_t eos_id);

// The inverse: a ModelConfig from HF LlamaConfig keys (missing optional keys keep loco's defaults).
ModelConfig model_config_from_hf_json(const nlohmann::json& json);

// Writes the export into `out_dir`, which must not exist or be empty (nothing is overwritten);
// the directory appears complete or not at all. `tokenizer` is the one loaded from `tokenizer_dir` (loco's files).
void write_hf_export(const std::filesystem::path& out_dir, const nlohmann::json& config_json,
                     const NamedTensors& parameters, const data::Tokenizer& tokenizer,
                     const std::filesystem::path& tokenizer_dir);

}  // namespace loco
