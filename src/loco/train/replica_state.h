// Note "elastic-heal" (docs/fault-tolerance.md "Healing"): a member that joins an elastic run, or whose
// state fell behind its quorum's, takes a live member's whole training state. The trainer lends a
// strategy access to it through ReplicaContext::replica: the same content a checkpoint holds (weights,
// AdamW moments, the strategy's outer state, step, tokens, data position), as bytes in memory.
#pragma once

#include <cstdint>
#include <string>

#include "loco/train/checkpoint.h"

namespace loco {

class ReplicaState {
 public:
  virtual ~ReplicaState() = default;

  // This replica's state now, encoded (replica_snapshot.h).
  virtual std::string encode() = 0;
  // Replaces this replica's state by another's encode(); `source` names the sender in errors.
  virtual void adopt(const std::string& encoded, const std::string& source) = 0;
  // Points the data stream at window `window` of the run's one global order of windows (an elastic
  // run's data layout: docs/fault-tolerance.md "Data").
  virtual void seek_data(std::uint64_t window) = 0;
  // The window the data stream reads next, in that order.
  virtual std::uint64_t data_window() const = 0;
  // Optimizer steps done.
  virtual std::int64_t step() const = 0;
};

// A replica's state as one safetensors blob: the checkpoint's tensors under "model/", "optimizer/" and
// "strategy/", and its state.json fields (checkpoint_state_json) in the metadata.
std::string encode_replica_snapshot(const CheckpointState& state, const CheckpointTensors& tensors);
// The inverse; CheckpointError naming `source` when the bytes are not a snapshot. `config` stays default.
LoadedCheckpoint decode_replica_snapshot(const std::string& bytes, const std::string& source);

}  // namespace loco
