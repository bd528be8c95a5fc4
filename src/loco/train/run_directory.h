// Note "replica-directories": replica 0 writes the run directory train.out_dir as a single run would
// (metrics.jsonl, config.toml, checkpoints/step_N); replica r > 0 writes the same files under
// OUT_DIR/replica_r/. Only replica 0 evaluates and shows progress. A resume names replica 0's
// checkpoint (OUT_DIR/checkpoints/step_N); replica r reads OUT_DIR/replica_r/checkpoints/step_N.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "loco/util/directory_lock.h"

namespace loco {

// Where replica `rank` keeps its files.
std::filesystem::path replica_directory(const std::filesystem::path& out_dir, int rank);
// The path a checkpoint's counterparts are found from: absolute and normalised ("step_6/", "step_6/." and
// "step_6" from inside checkpoints/ have no parent of their own), and a link to it (checkpoints/latest →
// step_6, not named after its step) followed; links in the directories above stay. Before, the run's other
// parts were looked for in made-up places, and a whole run was called incomplete.
std::filesystem::path checkpoint_location(const std::filesystem::path& checkpoint);

// Replica `rank`'s counterpart of replica 0's checkpoint `checkpoint`.
std::filesystem::path replica_checkpoint(const std::filesystem::path& checkpoint, int rank);

// The run directory (train.out_dir) that holds `checkpoint`: OUT of OUT/checkpoints/step_N (replica 0's, as a
// resume names it) or, `elastic`, of a member's OUT/members/NAME/checkpoints/step_N; nullopt for a checkpoint
// that lies outside such a directory (copied out of its run).
std::optional<std::filesystem::path> run_directory_of(const std::filesystem::path& checkpoint, bool elastic);

// Note "stage-directories": stage 0 of a pipeline replica (docs/pipeline.md) writes the replica's directory;
// stage s > 0 writes the same files, of its part of the model, under REPLICA_DIR/stage_s/.
std::filesystem::path stage_directory(const std::filesystem::path& replica_dir, int stage);
// Stage `stage`'s counterpart of stage 0's checkpoint `checkpoint` (REPLICA_DIR/checkpoints/step_N).
std::filesystem::path stage_checkpoint(const std::filesystem::path& checkpoint, int stage);
// The inverse: stage 0's counterpart of any stage's checkpoint (itself for stage 0's, or outside a pipeline).
std::filesystem::path first_stage_checkpoint(const std::filesystem::path& checkpoint);

// Note "own-directories": loco writes nothing into a prepared data directory or a checkpoint, nor anywhere
// under one, nor into a run's checkpoints/ directory. Throws ConfigError when `dir` (the `what` of the message,
// e.g. "train.out_dir") is or lies inside one.
void refuse_data_and_checkpoint_directories(const std::filesystem::path& dir, std::string_view what);

// ConfigError when `dir` is, or lies inside, a run's directory (its config.toml and metrics.jsonl, or a sweep
// run's result): what is put there is mixed with the run's files, and lost when that run is trained again.
void refuse_run_directories(const std::filesystem::path& dir, std::string_view what);

// Makes `dir` (a replica directory of the run in train.out_dir `out_dir`) ready to write, and claims it for
// this process while the returned lock lives: a run that writes it right now is refused, by name. A fresh
// run (no `resumed_from`) refuses a directory that holds another run's checkpoints or metrics, and a resumed
// one a train.out_dir whose checkpoints are not those of the checkpoint it resumes (replica 0's,
// `resumed_from`): loco never writes over a run, nor mixes two. Throws ConfigError naming the fix.
[[nodiscard]] DirectoryLock claim_run_directory(const std::filesystem::path& dir, const std::filesystem::path& out_dir,
                                                const std::optional<std::filesystem::path>& resumed_from);

}  // namespace loco
