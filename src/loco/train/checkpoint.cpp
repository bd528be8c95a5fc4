#include "loco/train/checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "loco/config/load_config.h"
#include "loco/data/tokenizer.h"
#include "loco/model/weights.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace fs = std::filesystem;

namespace {

constexpr int kFormatVersion = 1;

void put_file(const fs::path& dir, const std::string& name, const std::string& bytes, nlohmann::json& files) {
  write_file_atomic(dir / name, bytes);
  files[name] = {{"bytes", bytes.size()}, {"crc32", crc32_hex(bytes)}};
}

// Files only a resume reads.
bool holds_training_state(const std::string& name) {
  return name == "optimizer.safetensors" || name == "strategy.safetensors";
}

void verify_files(const fs::path& dir, const nlohmann::json& files, CheckpointUse use) {
  for (const auto& [name, expected] : files.items()) {
    if (use == CheckpointUse::inference && holds_training_state(name)) continue;
    const fs::path path = dir / name;
    if (!fs::exists(path)) {
      throw CheckpointError(fmt::format("checkpoint {} is missing {}; it was copied incompletely. Use another "
                                        "checkpoint or copy this one again",
                                        dir.string(), name));
    }
    const auto size = fs::file_size(path);
    if (size != expected.at("bytes").get<std::uint64_t>() || crc32_hex_of_file(path) != expected.at("crc32")) {
      throw CheckpointError(fmt::format(
          "checkpoint file {} is corrupted or truncated ({} bytes, checksum mismatch against state.json). "
          "Resume from an earlier checkpoint in {}",
          path.string(), size, dir.parent_path().string()));
    }
  }
}

SafetensorsContent optional_tensors(const fs::path& path) {
  if (!fs::exists(path)) return SafetensorsContent{{}, {}, path};
  return load_safetensors(path);
}

// state.json, checked to be a loco checkpoint of this format version.
nlohmann::json read_state_file(const fs::path& dir) {
  const fs::path state_path = dir / "state.json";
  if (!fs::is_directory(dir) || !fs::exists(state_path)) {
    throw CheckpointError(fmt::format("{} is not a loco checkpoint (no state.json). Checkpoints live in "
                                      "OUT_DIR/checkpoints/step_N; pass one of those directories",
                                      dir.string()));
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_file(state_path));
    if (doc.at("format") != "loco-checkpoint") throw CheckpointError("");
  } catch (const std::exception&) {
    throw CheckpointError(fmt::format("{} is corrupted or not a loco checkpoint's state file. Resume from "
                                      "another checkpoint",
                                      state_path.string()));
  }
  if (doc.value("version", 0) != kFormatVersion) {
    throw CheckpointError(fmt::format("{} has checkpoint format version {}, this loco reads version {}. Use "
                                      "the loco release that wrote it",
                                      state_path.string(), doc.value("version", 0), kFormatVersion));
  }
  return doc;
}

// The config a checkpoint was written with. Keys it predates keep their defaults, and those that mean
// "derive it" (dist.replicas = 0) are derived as the run would have.
RunConfig saved_config(const nlohmann::json& json) {
  RunConfig config = from_json(json);
  resolve_derived(config);
  return config;
}

}  // namespace

Llama restore_model(const LoadedCheckpoint& checkpoint, torch::Device device) {
  Llama model(checkpoint.config.model);
  load_model_weights(model, checkpoint.model);
  model->to(device);
  model->eval();
  return model;
}

namespace {

constexpr std::string_view kCheckpointPrefix = "step_";

}  // namespace

nlohmann::json checkpoint_state_json(const CheckpointState& state) {
  return {{"step", state.step},
          {"tokens", state.tokens},
          {"optimizer_steps", state.optimizer_steps},
          {"elapsed_s", state.elapsed_s},
          {"sampler", state.sampler},
          {"strategy", state.strategy},
          {"communication", state.communication}};
}

CheckpointState checkpoint_state_from_json(const nlohmann::json& doc) {
  CheckpointState state;
  state.step = doc.at("step").get<std::int64_t>();
  state.tokens = doc.at("tokens").get<std::int64_t>();
  state.optimizer_steps = doc.at("optimizer_steps").get<std::int64_t>();
  state.elapsed_s = doc.at("elapsed_s").get<double>();
  state.sampler = doc.at("sampler");
  state.strategy = doc.at("strategy");
  state.communication = doc.value("communication", nlohmann::json::object());
  return state;
}

std::string checkpoint_name(std::int64_t step) { return fmt::format("{}{}", kCheckpointPrefix, step); }

std::optional<std::int64_t> checkpoint_step(const std::string& name) {
  if (name.rfind(kCheckpointPrefix, 0) != 0) return std::nullopt;
  const char* digits = name.c_str() + kCheckpointPrefix.size();
  const char* end = name.c_str() + name.size();
  std::int64_t step = 0;
  const auto [stop, error] = std::from_chars(digits, end, step);
  if (digits == end || error != std::errc() || stop != end || step < 0) return std::nullopt;
  return step;
}

std::vector<std::pair<std::int64_t, fs::path>> list_checkpoints(const fs::path& checkpoints_dir) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  if (!fs::is_directory(checkpoints_dir)) return found;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir)) {
    const auto step = checkpoint_step(entry.path().filename().string());
    if (step && entry.is_directory()) found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

fs::path write_checkpoint(const fs::path& checkpoints_dir, const RunConfig& config, const CheckpointState& state,
                          const CheckpointTensors& tensors, const fs::path& tokenizer_dir) {
  ensure_writable_directory(checkpoints_dir, "checkpoint directory");
  const fs::path final_dir = checkpoints_dir / checkpoint_name(state.step);
  if (fs::exists(final_dir)) {
    throw CheckpointError(fmt::format("{} already exists and loco never overwrites a checkpoint. Move it away "
                                      "or choose another train.out_dir",
                                      final_dir.string()));
  }
  const fs::path tmp_dir = checkpoints_dir / fmt::format(".{}.partial-{}", checkpoint_name(state.step), ::getpid());
  make_fresh_directory(tmp_dir);
  try {
    nlohmann::json files = nlohmann::json::object();
    put_file(tmp_dir, "model.safetensors", encode_safetensors(tensors.model, {{"format", "pt"}}), files);
    put_file(tmp_dir, "optimizer.safetensors", encode_safetensors(tensors.optimizer, {}), files);
    if (!tensors.strategy.empty()) {
      put_file(tmp_dir, "strategy.safetensors", encode_safetensors(tensors.strategy, {}), files);
    }
    for (const auto& name : data::tokenizer_file_names(tokenizer_dir)) {
      put_file(tmp_dir, name, read_file(tokenizer_dir / name), files);
    }
    nlohmann::json doc = {{"format", "loco-checkpoint"}, {"version", kFormatVersion}};
    doc.update(checkpoint_state_json(state));
    doc["config"] = to_json(config);
    doc["files"] = files;
    write_file_atomic(tmp_dir / "state.json", doc.dump(2) + "\n");
    if (!rename_no_replace(tmp_dir, final_dir)) {
      throw CheckpointError(fmt::format("{} appeared while the checkpoint was written (another process?); loco "
                                        "never overwrites a checkpoint",
                                        final_dir.string()));
    }
  } catch (...) {
    std::error_code ec;
    remove_tree(tmp_dir, ec);
    throw;
  }
  return final_dir;
}

RunConfig read_checkpoint_config(const fs::path& dir) {
  const nlohmann::json doc = read_state_file(dir);
  try {
    return saved_config(doc.at("config"));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{}/state.json has no usable config ({}). Resume from another checkpoint",
                                      dir.string(), e.what()));
  }
}

LoadedCheckpoint read_checkpoint(const fs::path& dir, CheckpointUse use) {
  const nlohmann::json doc = read_state_file(dir);
  const fs::path state_path = dir / "state.json";
  LoadedCheckpoint out;
  out.dir = dir;
  try {
    verify_files(dir, doc.at("files"), use);
    out.config = saved_config(doc.at("config"));
    out.state = checkpoint_state_from_json(doc);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{} lacks a field or has one of the wrong type ({}); it was edited or written "
                                      "by another version. Resume from another checkpoint",
                                      state_path.string(), e.what()));
  }
  out.model = load_safetensors(dir / "model.safetensors");
  if (use == CheckpointUse::resume) {
    out.optimizer = load_safetensors(dir / "optimizer.safetensors");
    out.strategy = optional_tensors(dir / "strategy.safetensors");
  }
  return out;
}

}  // namespace loco
