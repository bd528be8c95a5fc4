#include "loco/train/checkpoint_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loco/config/load_config.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/json_integer.h"
#include "loco/util/json_problem.h"

namespace loco {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kCheckpointPrefix = "step_";

constexpr int kFormatVersion = 1;
// state.json holds the config, counts and the data position: a few KiB, far below this.
constexpr std::uint64_t kMaxStateFileBytes = 64ull << 20;

// Note "checkpoint-files": which files a checkpoint has is fixed by the format, not by the list state.json
// carries (an edited list must not turn a check off). Every file a reader reads is listed with its size
// and CRC-32 and verified first; a file the format names that is on disk but not listed is refused, as
// is a listed name the format does not have.
struct FormatFile {
  const char* name;
  bool required;         // every checkpoint has it (else: only checkpoints whose run needs it)
  bool training_state;  // read by a resume only
};
constexpr FormatFile kFormatFiles[] = {
    {"model.safetensors", true, false}, {"optimizer.safetensors", true, true}, {"strategy.safetensors", false, false},
    {"tokenizer.json", true, false},    {"tokenizer.model", false, false},
};

const FormatFile* format_file(const std::string& name) {
  for (const auto& file : kFormatFiles) {
    if (name == file.name) return &file;
  }
  return nullptr;
}

CheckpointError edited(const fs::path& dir, const std::string& what) {
  return CheckpointError(fmt::format("{}/state.json {}; it was edited or corrupted. Resume from another checkpoint",
                                     dir.string(), what));
}

// The run's checkpoints directory, which a resume names (each replica and stage then reads its own part):
// a part's (OUT/replica_1/stage_2/checkpoints/step_N) without its replica's and stage's directories.
fs::path run_checkpoints_of(const fs::path& checkpoint) {
  fs::path holder = checkpoint.parent_path().parent_path();
  for (const char* part : {"stage_", "replica_"}) {
    std::error_code unknown;
    if (holder.filename().string().rfind(part, 0) == 0 &&
        fs::is_directory(holder.parent_path() / "checkpoints", unknown)) {
      holder = holder.parent_path();
    }
  }
  return holder / "checkpoints";
}

void verify_file(const fs::path& dir, const std::string& name, const nlohmann::json& expected) {
  const fs::path path = dir / name;
  std::error_code unreadable;
  const fs::file_status status = fs::status(path, unreadable);
  // A path the file system refuses (a loop of symbolic links) is there, but no file: said so, not "missing".
  if (unreadable && unreadable != std::errc::no_such_file_or_directory) {
    throw CheckpointError(
        fmt::format("checkpoint file {} cannot be read ({}): a loop of symbolic links, or a link "
                    "that the system refuses, took its place. Use another checkpoint",
                    path.string(), unreadable.message()));
  }
  if (!fs::exists(status)) {
    throw CheckpointError(fmt::format("checkpoint {} is missing {}; it was copied incompletely. Use another "
                                      "checkpoint or copy this one again",
                                      dir.string(), name));
  }
  if (!fs::is_regular_file(status)) {
    throw CheckpointError(fmt::format("checkpoint file {} is not a regular file (a directory, FIFO or device took "
                                      "its place); loco does not read it. Use another checkpoint",
                                      path.string()));
  }
  const auto size = fs::file_size(path);
  if (size != json_integer<std::uint64_t>(expected.at("bytes")) || crc32_hex_of_file(path) != expected.at("crc32")) {
    throw CheckpointError(
        fmt::format("checkpoint file {} is corrupted or truncated ({} bytes, checksum mismatch against state.json). "
                    "Resume from an earlier checkpoint in {}",
                    path.string(), size, run_checkpoints_of(dir).string()));
  }
}

void verify_files(const fs::path& dir, const nlohmann::json& files, CheckpointUse use) {
  if (!files.is_object()) throw edited(dir, "has no list of files");
  for (const auto& [name, expected] : files.items()) {
    if (format_file(name) == nullptr) {
      throw edited(dir, fmt::format("lists '{}', which is not a file of a loco checkpoint", name.substr(0, 200)));
    }
  }
  for (const auto& file : kFormatFiles) {
    if (use == CheckpointUse::inference && file.training_state) continue;
    const bool listed = files.contains(file.name);
    std::error_code ignored;
    if (!listed && (file.required || fs::exists(fs::symlink_status(dir / file.name, ignored)))) {
      throw edited(dir, fmt::format("does not list {}, so its checksum cannot be verified", file.name));
    }
    if (listed) verify_file(dir, file.name, files.at(file.name));
  }
}

// state.json, checked to be a loco checkpoint of this format version.
nlohmann::json read_state_file(const fs::path& dir) {
  // A checkpoint still being written, or left by a write that was stopped (util/fs.h partial_path): the next
  // run in its directory removes it, which a run resumed from it did.
  fs::path normal = dir.lexically_normal();
  if (!normal.has_filename()) normal = normal.parent_path();  // "…/step_6/"
  const std::string name = normal.filename().string();
  if (name.rfind('.', 0) == 0 && name.find(".partial-") != std::string::npos) {
    throw CheckpointError(fmt::format("{} is a checkpoint being written, or left by a write that was stopped before "
                                      "it finished: it is no checkpoint, and the next run in that directory removes "
                                      "it. Pass a finished one (OUT_DIR/checkpoints/step_N)",
                                      dir.string()));
  }
  const fs::path state_path = dir / "state.json";
  std::error_code unreadable;
  if (!fs::exists(dir, unreadable) && !unreadable) {
    // Gone: removed by its run's train.keep_checkpoints as newer ones were written, or moved (audit round 14:
    // "is not a loco checkpoint (no state.json)"). The newest ones beside it, where it was.
    const auto beside = list_checkpoints(normal.parent_path());
    std::vector<std::string> newest;
    for (auto it = beside.rbegin(); it != beside.rend() && newest.size() < 3; ++it) {
      newest.push_back(it->second.filename().string());
    }
    throw CheckpointError(fmt::format(
        "{} does not exist{}. Pass an existing checkpoint{}", dir.string(),
        normal.parent_path().filename() == "checkpoints"
            ? " (a run with train.keep_checkpoints removes its older checkpoints as it writes new ones)"
            : "",
        newest.empty() ? " (OUT_DIR/checkpoints/step_N)"
                       : fmt::format(": {} holds {}", normal.parent_path().string(), fmt::join(newest, ", "))));
  }
  if (!fs::is_directory(dir) || !fs::exists(state_path)) {
    throw CheckpointError(fmt::format("{} is not a loco checkpoint (no state.json). Checkpoints live in "
                                      "OUT_DIR/checkpoints/step_N; pass one of those directories",
                                      dir.string()));
  }
  const std::string text = read_file(state_path, kMaxStateFileBytes);  // IoError for a FIFO, device, ...
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
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
// It is checked as any config is (complete_run_config): a checkpoint is a file a user may have edited, and
// eval, generate and export build a model from it. Its vocabulary was resolved from the data, so 0 is wrong.
RunConfig saved_config(const fs::path& dir, const nlohmann::json& json) {
  try {
    RunConfig config = from_json(json);
    complete_run_config(config);
    if (config.model.vocab_size <= 0) {
      throw ConfigError(fmt::format("model.vocab_size is {}, and a trained model has a vocabulary",
                                    config.model.vocab_size));
    }
    return config;
  } catch (const ConfigError& e) {
    throw edited(dir, fmt::format("holds a config loco refuses ({})", e.what()));
  }
}

}  // namespace

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

nlohmann::json checkpoint_state_json(const CheckpointState& state) {
  nlohmann::json doc = {{"step", state.step},
                        {"tokens", state.tokens},
                        {"optimizer_steps", state.optimizer_steps},
                        {"elapsed_s", state.elapsed_s},
                        {"sampler", state.sampler},
                        {"strategy", state.strategy},
                        {"communication", state.communication}};
  if (state.part) doc["part"] = {{"replica", state.part->replica}, {"stage", state.part->stage}};
  return doc;
}

CheckpointState checkpoint_state_from_json(const nlohmann::json& doc) {
  // Counts and times cannot be negative, nor so large that the run's next steps overflow them (2^40 steps, 2^62
  // tokens: beyond any run); the error names the field, since nlohmann's would not.
  constexpr std::int64_t kMostSteps = std::int64_t{1} << 40, kMostTokens = std::int64_t{1} << 62;
  auto count = [&](const nlohmann::json& in, const char* name, std::int64_t most) {
    std::int64_t value = -1;
    try {
      value = json_count<std::int64_t>(in.at(name));
    } catch (const nlohmann::json::type_error&) {
    }
    if (value < 0 || value > most) {
      throw nlohmann::json::type_error::create(
          302, fmt::format("field '{}' must be a count from 0 to {}, but is {}", name, most, in.at(name).dump()), &doc);
    }
    return value;
  };
  auto seconds = [&](const nlohmann::json& in, const char* name) {
    const nlohmann::json& value = in.at(name);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
      throw nlohmann::json::type_error::create(
          302, fmt::format("field '{}' must be a number of seconds, 0 or more, but is {}", name, value.dump()), &doc);
    }
    return value.get<double>();
  };
  CheckpointState state;
  state.step = count(doc, "step", kMostSteps);
  state.tokens = count(doc, "tokens", kMostTokens);
  state.optimizer_steps = count(doc, "optimizer_steps", kMostSteps);
  state.elapsed_s = seconds(doc, "elapsed_s");
  state.sampler = doc.at("sampler");
  state.strategy = doc.at("strategy");
  // Added to as the run goes on (communication_totals.h): a value that cannot be is refused now, not at the
  // first log line.
  state.communication = doc.value("communication", nlohmann::json::object());
  if (!state.communication.is_object()) {
    throw nlohmann::json::type_error::create(302, "field 'communication' must be an object", &doc);
  }
  for (const char* name : {"sim_wall_s", "comm_s"}) {
    if (state.communication.contains(name)) seconds(state.communication, name);
  }
  for (const char* name : {"bytes_sent", "bytes_recv"}) {
    if (state.communication.contains(name)) count(state.communication, name, kMostTokens);
  }
  if (doc.contains("part")) {
    constexpr std::int64_t kMostParts = std::int64_t{1} << 20;
    state.part = {count(doc.at("part"), "replica", kMostParts), count(doc.at("part"), "stage", kMostParts)};
  }
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
    return {saved_config(dir, doc.at("config")), checkpoint_state_from_json(doc)};
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(
        fmt::format("{} lacks a field or has one of the wrong type ({}); it was edited or written "
                    "by another version. Resume from another checkpoint",
                    (dir / "state.json").string(), json_problem(e)));
  }
}

RunConfig read_checkpoint_config(const fs::path& dir) {
  const nlohmann::json doc = read_state_file(dir);
  try {
    return saved_config(dir, doc.at("config"));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{}/state.json has no usable config ({}). Resume from another checkpoint",
                                      dir.string(), json_problem(e)));
  }
}

}  // namespace loco
