#include "loco/model/hf_export.h"

#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <optional>

#include "loco/data/hf_tokenizer.h"
#include "loco/data/tokenizer.h"
#include "loco/util/directory_lock.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace fs = std::filesystem;

nlohmann::json hf_config_json(const ModelConfig& m, std::int64_t bos_id, std::int64_t eos_id) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", m.vocab_size},
          {"hidden_size", m.hidden_size},
          {"intermediate_size", m.intermediate_size},
          {"num_hidden_layers", m.num_hidden_layers},
          {"num_attention_heads", m.num_attention_heads},
          {"num_key_value_heads", m.num_key_value_heads},
          {"head_dim", m.head_dim()},
          {"max_position_embeddings", m.max_position_embeddings},
          {"rope_theta", m.rope_theta},
          {"rope_scaling", nullptr},
          {"rms_norm_eps", m.rms_norm_eps},
          {"tie_word_embeddings", m.tie_word_embeddings},
          {"initializer_range", m.initializer_range},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"mlp_bias", false},
          {"pretraining_tp", 1},
          {"use_cache", true},
          {"bos_token_id", bos_id},
          {"eos_token_id", eos_id},
          {"torch_dtype", "float32"}};
}

ModelConfig model_config_from_hf_json(const nlohmann::json& j) {
  ModelConfig c;
  c.vocab_size = j.at("vocab_size");
  c.hidden_size = j.at("hidden_size");
  c.intermediate_size = j.at("intermediate_size");
  c.num_hidden_layers = j.at("num_hidden_layers");
  c.num_attention_heads = j.at("num_attention_heads");
  c.num_key_value_heads = j.value("num_key_value_heads", c.num_attention_heads);
  c.max_position_embeddings = j.at("max_position_embeddings");
  c.rope_theta = j.value("rope_theta", c.rope_theta);
  c.rms_norm_eps = j.value("rms_norm_eps", c.rms_norm_eps);
  c.tie_word_embeddings = j.value("tie_word_embeddings", c.tie_word_embeddings);
  c.initializer_range = j.value("initializer_range", c.initializer_range);
  return c;
}

namespace {

// loco's tokenizer.json is not the format Hugging Face reads under that name (AutoTokenizer failed on it): the
// export holds the Hugging Face files instead, and the sentencepiece model under the name its readers expect.
void write_hf_tokenizer(const data::Tokenizer& tokenizer, const fs::path& tokenizer_dir, std::int64_t model_max_length,
                        const fs::path& out) {
  const data::HfTokenizerFiles files = data::hf_tokenizer_files(tokenizer, model_max_length);
  const data::TokenizerInfo info = data::read_tokenizer_info(tokenizer_dir);
  if (!info.model_file.empty()) write_file_atomic(out / "tokenizer.model", read_file(tokenizer_dir / info.model_file));
  write_file_atomic(out / "special_tokens_map.json", files.special_tokens_map.dump(2) + "\n");
  write_file_atomic(out / "tokenizer_config.json", files.tokenizer_config.dump(2) + "\n");
  write_file_atomic(out / "tokenizer.json", files.tokenizer.dump(2) + "\n");
}

}  // namespace

void write_hf_export(const fs::path& requested_dir, const nlohmann::json& config_json, const NamedTensors& parameters,
                     const data::Tokenizer& tokenizer, const fs::path& tokenizer_dir) {
  // "out/" and "out" name the same directory; parent_path() of the former would be "out" itself.
  fs::path out_dir = fs::absolute(requested_dir).lexically_normal();
  if (!out_dir.has_filename()) out_dir = out_dir.parent_path();
  std::error_code unreadable;
  // The export is renamed into place, which would replace a link (a dangling one was reported as having
  // "appeared while the export was written").
  if (fs::is_symlink(out_dir, unreadable)) {
    throw IoError(
        fmt::format("export directory {} is a symbolic link (to {}); loco does not replace it. Give the "
                    "directory itself as --out, or choose a new one",
                    out_dir.string(), fs::read_symlink(out_dir, unreadable).string()));
  }
  if (fs::exists(out_dir, unreadable) && !fs::is_directory(out_dir, unreadable)) {
    throw IoError(fmt::format("export directory {} is a file (or a device), not a directory; loco does not replace "
                              "it. Choose a new --out",
                              out_dir.string()));
  }
  // An empty directory may be a run's that has only just begun (it locks its directory before writing into it):
  // claimed here until the export is renamed into its place (before: the export removed a live run's directory and
  // took its place, and the run wrote into the export, its lock held on the removed directory).
  std::optional<DirectoryLock> claim;
  if (fs::is_directory(out_dir, unreadable)) claim.emplace(out_dir, "--out directory");
  if (fs::exists(out_dir, unreadable) && !fs::is_empty(out_dir, unreadable)) {
    throw IoError(fmt::format("export directory {} already exists and is not empty; loco does not overwrite it. "
                              "Choose a new --out",
                              out_dir.string()));
  }
  const fs::path parent = out_dir.parent_path();
  ensure_writable_directory(parent, "export parent directory");
  const std::string name = out_dir.filename().string();
  // What an export to this name that was stopped left (a model's size, hidden).
  remove_interrupted_writes(
      parent, [&](const std::string& written) { return written == name; }, /*others_may_write=*/true);
  const fs::path tmp = partial_path(parent, name);
  make_fresh_directory(tmp);
  try {
    NamedTensors float32;
    for (const auto& [name, t] : parameters) float32.emplace_back(name, t.to(torch::kFloat32));
    save_safetensors(tmp / "model.safetensors", float32, {{"format", "pt"}});
    write_file_atomic(tmp / "config.json", config_json.dump(2) + "\n");
    write_file_atomic(tmp / "generation_config.json",
                      nlohmann::json({{"bos_token_id", config_json["bos_token_id"]},
                                      {"eos_token_id", config_json["eos_token_id"]}})
                              .dump(2) +
                          "\n");
    write_hf_tokenizer(tokenizer, tokenizer_dir, config_json.at("max_position_embeddings").get<std::int64_t>(), tmp);
    std::error_code ec;
    if (fs::exists(out_dir)) fs::remove(out_dir, ec);  // empty, checked above
    if (!rename_no_replace(tmp, out_dir)) {
      throw IoError(fmt::format("{} appeared while the export was written; choose a new --out", out_dir.string()));
    }
  } catch (...) {
    std::error_code ec;
    remove_tree(tmp, ec);
    throw;
  }
}

}  // namespace loco
