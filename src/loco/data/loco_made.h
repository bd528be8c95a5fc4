// Directories that loco writes as its own outputs, told by two files each, so that an unrelated meta.json or
// state.json does not count: a prepared data directory (meta.json and tokenizer.json, `loco prepare`) and a
// checkpoint (state.json and model.safetensors, `loco train`); and the directory of a `loco prepare` that was
// stopped before it finished, told by the marker file only loco writes. loco never writes into one
// (train/run_directory.h), nor reads one as corpus text (corpus_files.h): its shards and weights are not text.
#pragma once

#include <filesystem>

namespace loco::data {

inline constexpr const char* kPreparedDataDirectory = "a prepared data directory";
inline constexpr const char* kCheckpointDirectory = "a checkpoint";
inline constexpr const char* kInterruptedPreparation = "the directory of a `loco prepare` that did not finish";

// Written into --out by `loco prepare` before anything else and removed after meta.json: a directory with it and
// without meta.json is an interrupted run, whose files the next run may clear.
inline constexpr const char* kPrepareMarkerFileName = ".loco-prepare-incomplete";

// kPreparedDataDirectory, kCheckpointDirectory, kInterruptedPreparation, or nullptr when loco did not make `dir`.
const char* loco_made(const std::filesystem::path& dir);

}  // namespace loco::data
