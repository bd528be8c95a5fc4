// Checkpoints (docs/design.md §3 "Checkpoints"): one directory per checkpoint,
//   OUT_DIR/checkpoints/step_N/
//     model.safetensors      parameters, HF names
//     optimizer.safetensors  AdamW moments (exp_avg/<name>, exp_avg_sq/<name>)
//     strategy.safetensors   outer state of the distributed strategy (when it has any)
//     tokenizer.json (+ tokenizer.model)  so generate/export need nothing else
//     state.json             step, tokens, data position, config, and a CRC-32 and size per file
//                            (checkpoint_state.h)
// Every file is fsynced inside a temporary directory, which is then renamed with RENAME_NOREPLACE:
// a crash never leaves a directory named step_N that is incomplete, and an existing step_N is never
// replaced.
#pragma once

#include <filesystem>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "loco/config/run_config.h"
#include "loco/io/safetensors.h"
#include "loco/model/llama.h"
#include "loco/train/checkpoint_state.h"

namespace loco {

struct CheckpointTensors {
  NamedTensors model;
  NamedTensors optimizer;
  NamedTensors strategy;
};

// Writes CHECKPOINTS_DIR/step_N atomically and returns its path.
std::filesystem::path write_checkpoint(const std::filesystem::path& checkpoints_dir, const RunConfig& config,
                                       const CheckpointState& state, const CheckpointTensors& tensors,
                                       const std::filesystem::path& tokenizer_dir);

struct LoadedCheckpoint {
  std::filesystem::path dir;
  RunConfig config;
  CheckpointState state;
  SafetensorsContent model;
  SafetensorsContent optimizer;
  SafetensorsContent strategy;
  // For inference of a pipeline run: stage s's strategy tensors (its part's outer state), by stage.
  std::vector<SafetensorsContent> stage_strategies;
};

// Reads a checkpoint directory, verifying the size and CRC-32 of every file it uses first; throws
// CheckpointError naming the damaged file and what to do. For inference, `optimizer` stays empty, and the
// strategy's tensors are read for the parameters the run evaluated (algo/evaluated_parameters.h): `strategy`, or a
// pipeline run's `stage_strategies`.
LoadedCheckpoint read_checkpoint(const std::filesystem::path& dir, CheckpointUse use = CheckpointUse::resume);

// The model a checkpoint holds, built from its config and weights, on `device`.
Llama restore_model(const LoadedCheckpoint& checkpoint, torch::Device device);

// Removes the `.step_N.partial-PID` directories a process of this replica left when it was stopped while
// writing a checkpoint (each can be a whole checkpoint's size); returns their names. Only one process writes a
// replica's checkpoints at a time, so none of them is being written.
std::vector<std::string> remove_interrupted_checkpoints(const std::filesystem::path& checkpoints_dir);

// The latest checkpoint of the run in `run_dir` whose every part in sight is whole: its own `checkpoints/step_N`
// and the same step of each replica_R, stage_S and replica_R/stage_S directory beside it (on one host, every part;
// across hosts, those of this host's ranks). nullopt when none is.
std::optional<std::filesystem::path> latest_whole_checkpoint(const std::filesystem::path& run_dir);

// train.keep_checkpoints: removes all but the newest `keep` checkpoints of `checkpoints_dir` (0: none removed).
// Each is renamed to a `.step_N.partial-PID` name first, so that one removed halfway never looks whole (the next
// run in the directory removes what is left of it). IoError naming the one that cannot be renamed.
void remove_older_checkpoints(const std::filesystem::path& checkpoints_dir, std::int64_t keep);

}  // namespace loco
