// Directories that loco writes as its own outputs, told by two files each, so that an unrelated meta.json or
// state.json does not count: a prepared data directory (meta.json and tokenizer.json, `loco prepare`) and a
// checkpoint (state.json and model.safetensors, `loco train`). loco never writes into one
// (train/run_directory.h), nor reads one as corpus text (corpus_files.h): its shards and weights are not text.
#pragma once

#include <filesystem>

namespace loco::data {

inline constexpr const char* kPreparedDataDirectory = "a prepared data directory";
inline constexpr const char* kCheckpointDirectory = "a checkpoint";

// kPreparedDataDirectory, kCheckpointDirectory, or nullptr when loco did not make `dir` as either.
const char* loco_made(const std::filesystem::path& dir);

}  // namespace loco::data
