#include "loco/train/checkpoint_state.h"

#include <fmt/format.h>

#include "loco/config/load_config.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/json_integer.h"

namespace loco {

namespace fs = std::filesystem;

namespace {

constexpr int kFormatVersion = 1;

// Files only a resume reads.
bool holds_training_state(const std::string& name) {
  return name == "optimizer.safetensors" || name == "strategy.safetensors";
}

void verify_files(const fs::path& dir, const nlohmann::json& files, CheckpointUse use) {
  for (const auto& [name, expected] : files.items()) {
    if (use == CheckpointUse::inference && holds_training_state(name)) continue;
    // The names come from the file: only plain names, of regular files inside the checkpoint, are read.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      throw CheckpointError(fmt::format("{}/state.json lists '{}', which is not the name of a file in the checkpoint; "
                                        "it was edited or corrupted. Resume from another checkpoint",
                                        dir.string(), name));
    }
    const fs::path path = dir / name;
    std::error_code unreadable;  // a name the file system refuses (too long) is missing as well
    if (!fs::is_regular_file(path, unreadable)) {
      throw CheckpointError(fmt::format("checkpoint {} is missing {}; it was copied incompletely. Use another "
                                        "checkpoint or copy this one again",
                                        dir.string(), name));
    }
    const auto size = fs::file_size(path);
    if (size != json_integer<std::uint64_t>(expected.at("bytes")) || crc32_hex_of_file(path) != expected.at("crc32")) {
      throw CheckpointError(fmt::format(
          "checkpoint file {} is corrupted or truncated ({} bytes, checksum mismatch against state.json). "
          "Resume from an earlier checkpoint in {}",
          path.string(), size, dir.parent_path().string()));
    }
  }
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
  // Any JSON value (0 when absent), so that a mistyped version is reported rather than thrown by nlohmann.
  const nlohmann::json version = doc.contains("version") ? doc.at("version") : nlohmann::json(0);
  if (version != kFormatVersion) {
    throw CheckpointError(fmt::format("{} has checkpoint format version {}, this loco reads version {}. Use "
                                      "the loco release that wrote it",
                                      state_path.string(), version.dump(), kFormatVersion));
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
  state.step = json_integer<std::int64_t>(doc.at("step"));
  state.tokens = json_integer<std::int64_t>(doc.at("tokens"));
  state.optimizer_steps = json_integer<std::int64_t>(doc.at("optimizer_steps"));
  state.elapsed_s = doc.at("elapsed_s").get<double>();
  state.sampler = doc.at("sampler");
  state.strategy = doc.at("strategy");
  state.communication = doc.value("communication", nlohmann::json::object());
  return state;
}

nlohmann::json state_file_json(const RunConfig& config, const CheckpointState& state, const nlohmann::json& files) {
  nlohmann::json doc = {{"format", "loco-checkpoint"}, {"version", kFormatVersion}};
  doc.update(checkpoint_state_json(state));
  doc["config"] = to_json(config);
  doc["files"] = files;
  return doc;
}

CheckpointManifest read_checkpoint_manifest(const fs::path& dir, CheckpointUse use) {
  const nlohmann::json doc = read_state_file(dir);
  try {
    verify_files(dir, doc.at("files"), use);
    return {saved_config(doc.at("config")), checkpoint_state_from_json(doc)};
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{} lacks a field or has one of the wrong type ({}); it was edited or written "
                                      "by another version. Resume from another checkpoint",
                                      (dir / "state.json").string(), e.what()));
  }
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

}  // namespace loco
