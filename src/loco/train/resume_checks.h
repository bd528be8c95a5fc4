// The checks a resume passes before any work (note "replica-directories" in train/run_directory.h for
// where each replica's checkpoint lives). Each throws ConfigError naming the key or file and the fix.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "loco/config/run_config.h"
#include "loco/train/checkpoint.h"

namespace loco {

namespace comm {
class Group;
}

// The config's model is the checkpoint's: a run resumes with the model it was started with.
void require_same_model(const RunConfig& run, const LoadedCheckpoint& checkpoint);

// The saved data position means the same windows only with the same seed, sequence length, batch
// layout and replicas: anything else would silently train on another stream than the run it continues.
void require_same_data_stream(const RunConfig& run, const LoadedCheckpoint& checkpoint);

// `data_dir` was prepared with the tokenizer the checkpoint's model learned (its copy of the tokenizer
// files), and its vocabulary fits the model's: with another, the same ids stand for other text. Applies to
// every use of a checkpoint on data.
void require_same_tokenizer(const std::filesystem::path& data_dir, const LoadedCheckpoint& checkpoint);

// Streaming DiLoCo's outer state is saved per fragment: the fragments (streaming.fragments, assignment,
// embeddings_fragment) are the checkpoint's, or a fragment's outer state would be applied to other layers.
void require_same_fragments(const RunConfig& run, const LoadedCheckpoint& checkpoint);

// Note "run-checkpoints": the parts of one checkpoint that the ranks of `group` applied (each its own: the
// replicas of a stage, or the stages of a replica, `part` naming which) were written at the same moment of
// one run: the same step, optimizer steps, tokens and data position, and the same synchronisation schedule
// (`schedule`, Strategy::schedule_of of this rank's part). Parts that disagree (one edited, or copied from
// another step or run) would train apart or wait for each other at collectives that never match. Every rank
// learns the same: CheckpointError naming what differs, and in which ranks, on all of them.
void require_parts_agree(comm::Group& group, const char* part, const LoadedCheckpoint& checkpoint,
                         const nlohmann::json& schedule);

// The part of replica `rank`, stage `stage` of the checkpoint the run resumes from (`checkpoint`, replica 0's
// stage 0's) must exist. When the run has more replicas or stages than the checkpoint was written by,
// ConfigError naming both counts; when the counts agree and the part is missing (a process killed between the
// replicas' writes), CheckpointError saying the checkpoint is incomplete and naming the latest earlier one
// that holds the part. Nothing when replica 0's own part is not a checkpoint: read_checkpoint names that.
void require_part_for(const RunConfig& run, const std::filesystem::path& checkpoint, int rank, int stage);

// A part that says it is another replica's or stage's (state.json "part": copied into this place, or swapped) is
// refused, naming both; a part that does not say (an elastic member's, or written before loco recorded it) passes.
void require_own_part(const LoadedCheckpoint& part, int rank, int stage);

// The run has steps left after the checkpoint (`total_steps`). Whether a later checkpoint of the run would be
// overwritten is agreed by the ranks (Trainer, note "run-checkpoints").
void require_resumable(const LoadedCheckpoint& checkpoint, std::int64_t total_steps);

// The key of state.json's data position that holds the size of the training split it is a position in.
inline constexpr const char* kTrainTokensKey = "train_tokens";

// A note when the training split a resume reads (`train_tokens` of `data_dir`) is not the size of the one the
// checkpoint's run trained on: a run may go on in other data (continued training), but its saved position then
// points into them as into the old, and the tokenizer check alone let that pass without a word. Nothing for a
// checkpoint written before loco recorded the size.
std::optional<std::string> other_training_data_note(const LoadedCheckpoint& checkpoint,
                                                    const std::filesystem::path& data_dir, std::uint64_t train_tokens);

}  // namespace loco
