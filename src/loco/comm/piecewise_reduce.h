// A reduction done piece by piece where every rank's values meet (docs/algorithm-reference.md §4 point 3 and §11), the
// pattern of quantized_all_reduce.h with the reduction of a piece left to the caller:
//
//   1. The flat tensor is cut into `size` pieces (aligned to the codec's blocks); rank r owns piece r.
//   2. Reduce-scatter phase: every rank encodes each piece and an all-to-all delivers piece r of every
//      rank to rank r.
//   3. Rank r reduces the `size` encoded contributions to its piece (`reduce`) into float32 values. Its own
//      contribution goes through the codec too, so the result does not depend on who owns a piece.
//   4. All-gather phase: rank r encodes its reduced piece once; a ring all-gather brings it to every rank,
//      and every rank (r too) decodes every piece, so all ranks end with identical values.
//
// Wire bytes per rank: about 2·(N−1)/N·encoded_bytes(n), the ring all-reduce's volume at the codec's size;
// 1 + (N−1) rounds of latency, and whatever the reduction itself exchanges. The same code runs on every
// backend, so LocalGroup and C10dGroup give bit-identical results.
//
// Note "paced-exchange": the group's GroupOptions::round_size (link/round_size.h) cuts both phases into
// rounds: all-to-alls of the pieces' bytes [k·R, (k+1)·R), R per peer, then ring all-gathers of the
// reduced pieces' spans [k·S, (k+1)·S) with S = R·(N−1), so that every ring step, like every all-to-all
// round, keeps a link busy for about the same time. Up to Group::rounds_in_flight of a phase's rounds are
// started before the first is waited for (round_window.h), so that a link's latency is paid about once
// per phase. Every rank derives the same rounds from the same piece sizes, and the values are the same
// whatever the rounds and the window.
#pragma once

#include <cstdint>
#include <functional>

#include "loco/comm/codecs/codec.h"
#include "loco/comm/group.h"

namespace loco::comm {

// What rank r holds of its piece after the reduce-scatter phase.
struct PieceContributions {
  const std::uint8_t* bytes = nullptr;  // `count` encodings, in rank order, `piece_bytes` bytes each
  int count = 0;
  std::int64_t piece_bytes = 0;
  std::int64_t values = 0;  // values in the piece
};

// Writes the piece's `values` reduced float32 values to `out` (zeroed before). It runs between the two
// phases on every rank; a collective it starts must be started by every rank alike.
using PieceReduce = std::function<void(const PieceContributions& contributions, float* out)>;

// Where the time of one exchange went (loco bench allreduce reports it).
struct ExchangeTimes {
  int rounds = 0;               // collectives of both phases
  std::int64_t round_bytes = 0;  // per peer and round; 0: one round per phase
  double reduce_scatter_s = 0;  // waiting for the first phase's collectives
  double all_gather_s = 0;      // waiting for the second phase's
  double compute_s = 0;         // encoding, reducing and decoding on this rank
};

// In place on a float32 tensor (any device; the codec runs on the host). `times`, if given, receives
// this rank's breakdown.
void piecewise_reduce(Group& group, const torch::Tensor& tensor, const Codec& codec, const PieceReduce& reduce,
                      Timeout timeout = kGroupTimeout, ExchangeTimes* times = nullptr);

}  // namespace loco::comm
