// state.json, the manifest of a checkpoint directory (layout in checkpoint.h): its format and version, the
// resolved config, the trainer's counts and data position, and the size and CRC-32 of every other file.
// Needs no libtorch (the tensors are checkpoint.h's): everything a state file's bytes decide is read here,
// so its fuzz target (tests/fuzz/checkpoint_state_fuzzer.cpp) runs without libtorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loco/config/run_config.h"

namespace loco {

struct CheckpointState {
  std::int64_t step = 0;  // optimizer steps completed
  std::int64_t tokens = 0;
  std::int64_t optimizer_steps = 0;  // AdamW's own step counter (bias correction)
  double elapsed_s = 0;
  nlohmann::json sampler = nlohmann::json::object();   // data position
  nlohmann::json strategy = nlohmann::json::object();  // outer state that is not tensors
  // Communication so far (bytes_sent, bytes_recv, comm_s with several replicas; sim_wall_s), so
  // that a resumed run's metrics continue the counts.
  nlohmann::json communication = nlohmann::json::object();
  // Whose part of a static run's checkpoint this is ("part" in state.json): a part copied into another
  // replica's or stage's place, or swapped, is refused at a resume. nullopt in an elastic member's (its rank
  // changes with each quorum) and in checkpoints written before loco recorded it.
  struct Part {
    std::int64_t replica = 0, stage = 0;
  };
  std::optional<Part> part;
};

// The fields of state.json that CheckpointState holds, and back (nlohmann::json::exception when one is
// missing or of the wrong type; callers say which file).
nlohmann::json checkpoint_state_json(const CheckpointState& state);
CheckpointState checkpoint_state_from_json(const nlohmann::json& doc);

// The directory name of the checkpoint after `step` optimizer steps ("step_N").
std::string checkpoint_name(std::int64_t step);
// The inverse, the one place that reads the name: N for "step_N", nullopt for any other name.
std::optional<std::int64_t> checkpoint_step(const std::string& name);
// The finished checkpoints in `checkpoints_dir` (step_N directories) as (N, path), by step; empty when
// the directory does not exist.
std::vector<std::pair<std::int64_t, std::filesystem::path>> list_checkpoints(
    const std::filesystem::path& checkpoints_dir);
// The whole state.json of a checkpoint of `config` at `state`; `files` maps each other file's name to
// {"bytes", "crc32"}.
nlohmann::json state_file_json(const RunConfig& config, const CheckpointState& state, const nlohmann::json& files);

// What a reader needs: a resume needs everything, eval/generate/export only the model (the
// optimizer moments alone are twice its size, not worth reading and checksumming for nothing).
enum class CheckpointUse { resume, inference };

struct CheckpointManifest {
  RunConfig config;
  CheckpointState state;
};

// Reads DIR/state.json and verifies the size and CRC-32 of every file it lists that `use` needs; throws
// CheckpointError naming the damaged file and what to do.
CheckpointManifest read_checkpoint_manifest(const std::filesystem::path& dir, CheckpointUse use);

// Only the resolved config a checkpoint was written with (reads state.json alone, no other file).
RunConfig read_checkpoint_config(const std::filesystem::path& dir);

}  // namespace loco
