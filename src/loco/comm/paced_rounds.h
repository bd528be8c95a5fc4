// The pieces a paced exchange is cut into (note "paced-exchange", piecewise_reduce.h): rounds of a span
// of each rank's bytes, and the buffers a round's collective writes into. Shared by the two phases of
// piecewise_reduce.h and by paced_all_gather.h.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>

#include "loco/comm/group.h"

namespace loco::comm {

inline torch::Tensor byte_buffer(std::int64_t bytes) { return torch::empty({bytes}, torch::kUInt8); }

// The rounds of a phase whose largest piece is `largest` bytes: spans [start, start + step) of every
// piece, at least one round (an empty exchange still meets every rank).
struct Rounds {
  std::int64_t step;
  std::int64_t count;
  Rounds(std::int64_t largest, std::int64_t round_bytes) {
    step = round_bytes > 0 ? round_bytes : std::max<std::int64_t>(largest, 1);
    count = std::max<std::int64_t>((largest + step - 1) / step, 1);
  }
  // Bytes of a piece of `bytes` that round `round` carries.
  std::int64_t slice(std::int64_t bytes, std::int64_t round) const {
    return std::clamp<std::int64_t>(bytes - round * step, 0, step);
  }
  std::int64_t start(std::int64_t bytes, std::int64_t round) const { return std::min(round * step, bytes); }
};

// A started round of a phase: the buffers its collective writes into and reads from, and its handle.
struct OpenRound {
  std::int64_t round;
  torch::Tensor sent, received;
  WorkHandle work;
};

// Puts a round's `part` (`size` blocks of `bytes`, one per source rank, on any device) into the host
// tensor its phase assembles: block r at r·stride + first of `whole`.
void place_by_source(const torch::Tensor& whole, const torch::Tensor& part, std::int64_t stride, std::int64_t first,
                     std::int64_t bytes, int size);

}  // namespace loco::comm
