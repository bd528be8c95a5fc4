// The stream of (input, target) windows one replica trains on.
//
// The split's L tokens are cut into W = floor((L - 1) / seq_len) windows; window i covers tokens
// [i*seq_len, i*seq_len + seq_len]: its first seq_len tokens are the inputs, its last seq_len the
// targets. In epoch e the windows are permuted (keyed_permutation.h, keyed by mix_seed(seed, e)) and
// replica r of R takes permuted positions r, r+R, r+2R, ...: the replicas' windows are disjoint within
// an epoch and every replica sees W / R (rounded down) of them. The stream depends on nothing but
// (data, seq_len, seed, replica, R, shuffle), so SamplerState {epoch, cursor, order} in a checkpoint
// reproduces it exactly, and the sampler's memory does not grow with the corpus.
//
// Note "keyed-order": until 2026-11-25 an epoch's order was a stored Fisher-Yates permutation
// (shuffle.h: 8 bytes per window per replica). A checkpoint written then has no "order" in its sampler
// state; it resumes with that order, exactly as it would have continued.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "loco/data/keyed_permutation.h"
#include "loco/data/token_dataset.h"

namespace loco::data {

struct SamplerState {
  enum class Order { keyed, stored };  // keyed_permutation.h; a stored permutation (note "keyed-order")
  std::uint64_t epoch = 0;
  std::uint64_t cursor = 0;  // windows this replica consumed in `epoch`
  Order order = Order::keyed;

  nlohmann::json to_json() const;
  static SamplerState from_json(const nlohmann::json& j);  // DataError if malformed
};

class BatchSampler {
 public:
  // `data` must outlive the sampler. DataError when the split has too few tokens for one window
  // per replica.
  BatchSampler(const TokenDataset& data, std::int64_t seq_len, std::uint64_t seed, std::int64_t replica,
               std::int64_t num_replicas, bool shuffle);

  // Fills inputs and targets, each (batch_size, seq_len) row-major; targets = inputs shifted by one
  // token. A batch may span epochs.
  void next_batch(std::int64_t batch_size, std::int64_t* inputs, std::int64_t* targets);

  SamplerState state() const { return state_; }
  // Continues exactly where `state` was taken; DataError if it cannot come from this stream.
  void restore(const SamplerState& state);
  std::uint64_t windows_per_epoch() const { return windows_per_epoch_; }

 private:
  void start_epoch(std::uint64_t epoch);

  const TokenDataset& data_;
  std::uint64_t seq_len_;
  std::uint64_t seed_;
  std::uint64_t replica_;
  std::uint64_t num_replicas_;
  bool shuffle_;
  std::uint64_t windows_;            // W, over all replicas
  std::uint64_t windows_per_epoch_;  // W / R
  SamplerState state_;
  std::optional<KeyedPermutation> keyed_;  // this epoch's order of all W windows (shuffling, Order::keyed)
  std::vector<std::uint64_t> stored_;      // the same for Order::stored
};

}  // namespace loco::data
