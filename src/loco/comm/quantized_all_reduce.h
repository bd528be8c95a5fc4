// All-reduce with every contribution sent through a codec (docs/algorithm-reference.md §4 point 3; docs/design.md §3
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
#include "loco/comm/piecewise_reduce.h"

namespace loco::comm {

// In place on a float32 tensor (any device; the codec runs on the host), paced by the group's
// GroupOptions::round_size (note "paced-exchange", piecewise_reduce.h). `times`: as piecewise_reduce's.
void quantized_all_reduce(Group& group, const torch::Tensor& tensor, const Codec& codec, ReduceOp op = ReduceOp::sum,
                          Timeout timeout = kGroupTimeout, ExchangeTimes* times = nullptr);

// The all-reduce the training exchanges use: Gloo's (or NCCL's) own ring for fp32 (codec null or fp32)
// where uses_backend_ring says so; quantized_all_reduce otherwise, fp32 included, so that a paced group
// paces the exchanges that gain from it. `times` stays untouched on the ring path.
void codec_all_reduce(Group& group, const torch::Tensor& tensor, const Codec* codec, ReduceOp op,
                      ExchangeTimes* times = nullptr);

// Whether codec_all_reduce takes the backend's ring for this group, codec and a tensor of `bytes` (note
// "fp32-ring"): only for fp32, and then
//   - where its paced exchange would be one round anyway (no pacing, or rounds as large as the pieces,
//     as `auto` makes them for a link with tens of ms of latency): the ring is faster (docs/results.md,
//     "Pacing": 1.22–1.26× of the bound against 1.9× for one-round pieces at 10 Mbit/s);
//   - with comm.round_kib = auto, where the link (configured, or measured) carries 50 Mbit/s or more.
//     The pieces path copies what the ring does not (encode, per-round gathering and placing, re-encode,
//     decode: 0.42 s for 64 MB between 2 ranks on the 2-core VM), and pacing pays for that only on slow
//     links: over tc tbf links the ring ran at 1.22–1.26× of its bound at 10 Mbit/s against 1.10–1.12×
//     paced, but at 1.09–1.11× against 1.09–1.18× at 100 Mbit/s and 1.06× against 1.83× at 1 Gbit/s
//     ("1 Gbit/s" in results.md). 50: between the two rates measured, and below the 83–95% of 100 Mbit/s
//     that a measured link reads. A fixed round size paces fp32 at any rate.
bool uses_backend_ring(const Group& group, const Codec* codec, std::int64_t bytes);

}  // namespace loco::comm
