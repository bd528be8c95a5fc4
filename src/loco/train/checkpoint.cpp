#include "loco/train/checkpoint.h"

#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <string_view>

#include "loco/config/load_config.h"
#include "loco/data/tokenizer.h"
#include "loco/model/weights.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/json_difference.h"

namespace loco {

namespace fs = std::filesystem;

namespace {

void record_file(const std::string& name, const WrittenFile& written, nlohmann::json& files) {
  files[name] = {{"bytes", written.bytes}, {"crc32", written.crc32}};
}

SafetensorsContent optional_tensors(const fs::path& path) {
  if (!fs::exists(path)) return SafetensorsContent{{}, {}, path};
  return load_safetensors(path);
}

}  // namespace

Llama restore_model(const LoadedCheckpoint& checkpoint, torch::Device device) {
  Llama model(checkpoint.config.model);
  load_model_weights(model, checkpoint.model);
  model->to(device);
  model->eval();
  return model;
}

std::vector<std::string> remove_interrupted_checkpoints(const fs::path& checkpoints_dir) {
  return remove_interrupted_writes(checkpoints_dir,
                                   [](const std::string& name) { return checkpoint_step(name).has_value(); });
}

namespace {

bool has_state(const fs::path& checkpoint) {
  std::error_code unreadable;
  return fs::exists(checkpoint / "state.json", unreadable);
}

// The directories beside `run_dir`'s own of the run's parts this process can see.
std::vector<fs::path> visible_parts(const fs::path& run_dir) {
  std::vector<fs::path> parts;
  std::error_code unreadable;
  const auto is_part = [](const fs::path& dir) {
    const std::string name = dir.filename().string();
    return name.rfind("replica_", 0) == 0 || name.rfind("stage_", 0) == 0;
  };
  for (const auto& entry : fs::directory_iterator(run_dir, unreadable)) {
    if (!entry.is_directory(unreadable) || !is_part(entry.path())) continue;
    parts.push_back(entry.path());
    for (const auto& inner : fs::directory_iterator(entry.path(), unreadable)) {
      if (inner.is_directory(unreadable) && is_part(inner.path())) parts.push_back(inner.path());
    }
  }
  return parts;
}

}  // namespace

std::optional<fs::path> latest_whole_checkpoint(const fs::path& run_dir) {
  const std::vector<fs::path> parts = visible_parts(run_dir);
  const auto found = list_checkpoints(run_dir / "checkpoints");
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    const fs::path name = it->second.filename();
    if (has_state(it->second) && std::all_of(parts.begin(), parts.end(), [&](const fs::path& part) {
          return has_state(part / "checkpoints" / name);
        })) {
      return it->second;
    }
  }
  return std::nullopt;
}

void remove_older_checkpoints(const fs::path& checkpoints_dir, std::int64_t keep) {
  if (keep <= 0) return;
  const auto found = list_checkpoints(checkpoints_dir);
  const auto older = static_cast<std::int64_t>(found.size()) - keep;
  for (std::int64_t i = 0; i < older; ++i) {
    const fs::path& dir = found[static_cast<std::size_t>(i)].second;
    const fs::path going = partial_path(checkpoints_dir, dir.filename().string());
    std::error_code failed;
    fs::rename(dir, going, failed);
    if (failed) {
      throw IoError(fmt::format("cannot remove checkpoint {} (train.keep_checkpoints = {}): {}", dir.string(), keep,
                                failed.message()));
    }
    remove_tree(going, failed);  // what is left of it goes with the next run's interrupted writes
  }
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
  const fs::path tmp_dir = partial_path(checkpoints_dir, checkpoint_name(state.step));
  make_fresh_directory(tmp_dir);
  try {
    nlohmann::json files = nlohmann::json::object();
    // Tensors are streamed to their files: a checkpoint never holds a second copy of the state.
    const auto put_tensors = [&](const std::string& name, const NamedTensors& named,
                                 const std::map<std::string, std::string>& metadata) {
      record_file(name, save_safetensors(tmp_dir / name, named, metadata), files);
    };
    put_tensors("model.safetensors", tensors.model, {{"format", "pt"}});
    put_tensors("optimizer.safetensors", tensors.optimizer, {});
    if (!tensors.strategy.empty()) put_tensors("strategy.safetensors", tensors.strategy, {});
    for (const auto& name : data::tokenizer_file_names(tokenizer_dir)) {
      record_file(name, write_file_atomic(tmp_dir / name, read_file(tokenizer_dir / name)), files);
    }
    write_file_atomic(tmp_dir / "state.json", state_file_json(config, state, files).dump(2) + "\n");
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

namespace {

// The layers a model part holds, as "layers 2-3" (or "no layer").
std::string layers_held(const SafetensorsContent& part) {
  std::set<std::int64_t> layers;
  for (const auto& [name, tensor] : part.tensors) {
    if (const std::int64_t layer = decoder_layer_of(name); layer >= 0) layers.insert(layer);
  }
  if (layers.empty()) return "no layer";
  if (layers.size() == 1) return fmt::format("layer {}", *layers.begin());
  return fmt::format("layers {}-{}", *layers.begin(), *layers.rbegin());
}

// Whether a pipeline checkpoint's part is stage 0's: the first stage holds the first layer. A part's stage is
// read from what it holds, not from its path: a run of its own in a directory named stage_7 inside another
// run's directory was read as that run's stage 7, and eval, generate and export gave the other run's model.
bool holds_first_layer(const SafetensorsContent& part) {
  return std::any_of(part.tensors.begin(), part.tensors.end(),
                     [](const auto& named) { return decoder_layer_of(named.first) == 0; });
}

// Why stage `stage`'s part of pipeline checkpoint `first` (stage 0's) is not there, and what to read instead. Each
// stage renames its own part into place: while a live run's later stage is still writing it, stage 0's is already
// there (before: "Copy the whole run directory", for a run on one disk).
std::string missing_stage_part(const fs::path& first, std::int64_t stages, int stage) {
  const fs::path part = stage_checkpoint(first, stage);
  const std::string partial_prefix = "." + part.filename().string() + ".partial-";
  bool being_written = false;
  std::error_code unreadable;
  for (const auto& entry : fs::directory_iterator(part.parent_path(), unreadable)) {
    being_written = being_written || entry.path().filename().string().rfind(partial_prefix, 0) == 0;
  }
  // The run's latest step that every part holds (first: RUN/checkpoints/step_N).
  const std::optional<fs::path> whole = latest_whole_checkpoint(first.parent_path().parent_path());
  return fmt::format(
      "{} is stage 0 of a pipeline run of {} stages, but stage {}'s checkpoint ({}) {}: a pipeline run's model is "
      "the step_N of every stage. {}",
      first.string(), stages, stage, part.string(),
      being_written ? "is still being written (the run is live, or its process stopped while writing it)"
                    : "is missing",
      !whole ? std::string(being_written ? "Wait for it, or copy the whole run directory once it is written"
                                         : "Copy the whole run directory")
             : fmt::format("Use {}, the latest checkpoint every part holds{}", whole->string(),
                           being_written ? "" : ", or copy the whole run directory"));
}

// A pipeline run's model is its stages' parts (docs/pipeline.md "Checkpoints"): `out` is stage 0's
// checkpoint; the parameters of every other stage's checkpoint of the same step join its own, the tied
// embedding (held by the first and last stage) once, after checking that both copies are equal.
void join_stage_parts(LoadedCheckpoint& out) {
  const std::int64_t stages = out.config.dist.stages;
  out.stage_strategies.push_back(optional_tensors(out.dir / "strategy.safetensors"));
  for (int s = 1; s < stages; ++s) {
    const fs::path dir = stage_checkpoint(out.dir, s);
    if (!fs::is_directory(dir)) throw CheckpointError(missing_stage_part(out.dir, stages, s));
    const CheckpointManifest manifest = read_checkpoint_manifest(dir, CheckpointUse::inference);
    if (manifest.state.step != out.state.step) {
      throw CheckpointError(fmt::format("{} holds step {}, but stage 0's checkpoint {} holds step {}: the stages' "
                                        "checkpoints were mixed up. Copy the whole run directory",
                                        dir.string(), manifest.state.step, out.dir.string(), out.state.step));
    }
    // The stages of one run share its config (note "same-config"): a part from another run or size would
    // join layers of another model.
    if (const auto difference =
            first_key_difference(shared_settings_json(manifest.config), shared_settings_json(out.config))) {
      throw CheckpointError(fmt::format(
          "{} was written with {} = {}, but stage 0's checkpoint {} with {}: the "
          "stages' checkpoints come from different runs. Copy the whole run directory",
          dir.string(), difference->key, value_text(difference->in_a), out.dir.string(), value_text(difference->in_b)));
    }
    out.stage_strategies.push_back(optional_tensors(dir / "strategy.safetensors"));
    SafetensorsContent part = load_safetensors(dir / "model.safetensors");
    if (holds_first_layer(part)) {
      throw CheckpointError(
          fmt::format("{} holds the first layer, as stage 0's checkpoint {} does: it is the first "
                      "stage of another run, not stage {} of this one. Copy the whole run directory",
                      dir.string(), out.dir.string(), s));
    }
    for (auto& [name, tensor] : part.tensors) {
      const auto held = out.model.tensors.find(name);
      if (held == out.model.tensors.end()) {
        out.model.tensors.emplace(name, std::move(tensor));
      } else if (!torch::equal(held->second, tensor)) {
        throw CheckpointError(fmt::format("{} and {} hold different values of {}, which the stages keep equal: "
                                          "one of them was edited. Use another checkpoint",
                                          out.dir.string(), dir.string(), name));
      }
    }
  }
}

// The whole model of a pipeline checkpoint named by a later stage's part: stage 0's checkpoint, at the path of
// which that part is one of the stages' (docs/pipeline.md "Checkpoints").
LoadedCheckpoint read_whole_from_later_stage(const LoadedCheckpoint& part, CheckpointUse use) {
  const fs::path first = first_stage_checkpoint(part.dir);
  const std::string what = fmt::format(
      "{} is a later stage's part of a pipeline checkpoint of {} stages (it holds {}, not the first "
      "layer)",
      part.dir.string(), part.config.dist.stages, layers_held(part.model));
  if (first == part.dir || !fs::is_directory(first)) {
    throw CheckpointError(fmt::format(
        "{}, and stage 0's part {}: a pipeline run's model is the step_N of every stage, found from stage 0's. "
        "Copy the whole run directory and name the checkpoint in its checkpoints/",
        what,
        first == part.dir ? "is not beside it (a stage's part sits in RUN/stage_S/checkpoints/)"
                          : fmt::format("({}) is missing", first.string())));
  }
  LoadedCheckpoint whole = read_checkpoint(first, use);
  const fs::path named = checkpoint_location(part.dir);
  for (int s = 1; s < whole.config.dist.stages; ++s) {
    if (checkpoint_location(stage_checkpoint(whole.dir, s)) == named) return whole;
  }
  throw CheckpointError(
      fmt::format("{}, but it is not one of the stages of {}, which sits where its stage 0 would: "
                  "the directories of two runs were mixed. Copy the whole run directory",
                  what, first.string()));
}

}  // namespace

LoadedCheckpoint read_checkpoint(const fs::path& dir, CheckpointUse use) {
  CheckpointManifest manifest = read_checkpoint_manifest(dir, use);
  // A checkpoint's directory is named after its step, and a run's parts of one step are found by that name:
  // another step inside was edited in (or the directory renamed), and would pass for the named one.
  const std::string name = (dir.filename().empty() ? dir.parent_path() : dir).filename().string();
  if (const auto named = checkpoint_step(name); named && *named != manifest.state.step) {
    throw CheckpointError(fmt::format("{} holds step {} (state.json), not {}: it was edited, or renamed from another "
                                      "step. Resume from another checkpoint, or give it its own name",
                                      dir.string(), manifest.state.step, *named));
  }
  LoadedCheckpoint out;
  out.dir = dir;
  out.config = std::move(manifest.config);
  out.state = std::move(manifest.state);
  out.model = load_safetensors(dir / "model.safetensors");
  if (use == CheckpointUse::resume) {
    out.optimizer = load_safetensors(dir / "optimizer.safetensors");
    out.strategy = optional_tensors(dir / "strategy.safetensors");
  } else if (out.config.dist.stages > 1) {
    // The model of a pipeline run, whichever stage's checkpoint was named.
    if (!holds_first_layer(out.model)) return read_whole_from_later_stage(out, use);
    join_stage_parts(out);
  } else {
    out.strategy =
        optional_tensors(dir / "strategy.safetensors");  // the parameters evaluated (algo/evaluated_parameters.h)
  }
  return out;
}

}  // namespace loco
