// All-reduce with every contribution sent through a codec (ALGORITHMS.md §4 point 3; DESIGN.md §3
// "Group"): the sum is taken in fp32 and nothing is re-quantised at each hop. It is piecewise_reduce.h
// whose reduction of a piece decodes the `size` encodings and sums them in fp32, in rank order (divided by
// `size` here for the mean).
//
// Wire bytes per rank: about 2·(N−1)/N·encoded_bytes(n), the ring all-reduce's volume at the codec's
// size; 1 + (N−1) rounds of latency. LocalGroup and C10dGroup produce bit-identical results. Error: each
// element is off by at most the sum over ranks of the codec's bound on its contribution, plus the bound
// on re-encoding the sum (docs/codecs.md).
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
