// The checks a resume passes before any work (note "replica-directories" in train/run_directory.h for
// where each replica's checkpoint lives). Each throws ConfigError naming the key or file and the fix.
#pragma once

#include <cstdint>
#include <filesystem>

#include "loco/config/run_config.h"
#include "loco/train/checkpoint.h"

namespace loco {

// The config's model is the checkpoint's: a run resumes with the model it was started with.
void require_same_model(const RunConfig& run, const LoadedCheckpoint& checkpoint);

// The saved data position means the same windows only with the same seed, sequence length, batch
// layout and replicas: anything else would silently train on another stream than the run it continues.
void require_same_data_stream(const RunConfig& run, const LoadedCheckpoint& checkpoint);

// `data_dir` was prepared with the tokenizer the checkpoint's model learned (its copy of the tokenizer
// files), and its vocabulary fits the model's: with another, the same ids stand for other text. Applies to
// every use of a checkpoint on data.
void require_same_tokenizer(const std::filesystem::path& data_dir, const LoadedCheckpoint& checkpoint);

// The run has steps left after the checkpoint (`total_steps`). Whether a later checkpoint of the run would be
// overwritten is agreed by the ranks (Trainer, note "run-checkpoints").
void require_resumable(const LoadedCheckpoint& checkpoint, std::int64_t total_steps);

}  // namespace loco
