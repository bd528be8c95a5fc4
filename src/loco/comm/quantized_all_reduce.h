// All-reduce with every contribution sent through a codec (ALGORITHMS.md §4 point 3; DESIGN.md §3
// "Group"): the sum is taken in fp32 and nothing is re-quantised at each hop.
//
//   1. The flat tensor is cut into `size` pieces (aligned to the codec's blocks); rank r owns piece r.
//   2. Reduce-scatter phase: every rank encodes each piece and an all-to-all delivers piece r of
//      every rank to rank r.
//   3. Rank r decodes the `size` encodings of its piece and sums them in fp32, in rank order. Its
//      own piece goes through the codec too, so the result does not depend on who owns a piece.
//      For the mean the sum is divided by `size` here.
//   4. All-gather phase: rank r encodes the reduced piece once; a ring all-gather brings it to every rank,
//      and every rank (r too) decodes every piece, so all ranks end with identical values.
//
// Wire bytes per rank: about 2·(N−1)/N·encoded_bytes(n), the ring all-reduce's volume at the codec's
// size; 1 + (N−1) rounds of latency. The same code runs on every backend, so LocalGroup and C10dGroup
// produce bit-identical results. Error: each element is off by at most the sum over ranks of the
// codec's bound on its contribution, plus the bound on re-encoding the sum (docs/codecs.md).
#pragma once

#include "loco/comm/codecs/codec.h"
#include "loco/comm/group.h"

namespace loco::comm {

// In place on a float32 tensor (any device; the codec runs on the host).
// round_bytes > 0 paces the reduce-scatter phase: it runs as rounds that each send at most
// round_bytes to every peer (note "paced-exchange"). Over tc-shaped 100 Mbit/s links one all-to-all
// of whole pieces ran at 1.5x the ring bound and rounds of ~32 KiB per peer near 1.1x, but every
// round costs a latency: use it only where latency is small next to round_bytes / bandwidth.
void quantized_all_reduce(Group& group, const torch::Tensor& tensor, const Codec& codec, ReduceOp op = ReduceOp::sum,
                          Timeout timeout = kGroupTimeout, std::int64_t round_bytes = 0);

}  // namespace loco::comm
