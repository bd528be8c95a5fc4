// Fuzz target: state.json of a checkpoint directory (train/checkpoint_state.h), as `loco train --resume`,
// eval, generate and export read it (format, version, the config, the trainer's state, then the size and
// CRC-32 of each file it lists), and the same fields as a replica's snapshot carries them to a healing peer
// (replica_state.cpp). The directory holds the files every checkpoint has (model.safetensors,
// optimizer.safetensors, tokenizer.json), each with the bytes whose size and checksum the seeds list, so
// that verifying the files is reached with a match as well as a mismatch, and the config and counts after it.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.h"
#include "loco/train/checkpoint_state.h"
#include "loco/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto model = loco::fuzz::write_scratch_file("model.safetensors", "loco fuzz");
  static const auto optimizer = loco::fuzz::write_scratch_file("optimizer.safetensors", "loco fuzz");
  static const auto tokenizer = loco::fuzz::write_scratch_file("tokenizer.json", "loco fuzz");
  const auto dir = model.parent_path();
  const std::string text = loco::fuzz::as_text(data, size);
  loco::fuzz::write_scratch_file("state.json", text);
  for (const auto use : {loco::CheckpointUse::resume, loco::CheckpointUse::inference}) {
    try {
      loco::read_checkpoint_manifest(dir, use);
    } catch (const loco::Error&) {  // CheckpointError, or ConfigError for a config key loco does not know
    }
  }
  try {
    loco::read_checkpoint_config(dir);
  } catch (const loco::Error&) {
  }
  // decode_replica_snapshot turns nlohmann's exceptions, and only those, into CheckpointError.
  try {
    loco::checkpoint_state_from_json(nlohmann::json::parse(text));
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
