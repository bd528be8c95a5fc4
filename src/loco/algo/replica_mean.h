// The mean over replicas of a pseudo-gradient (docs/algorithm-reference.md §1 and §4 point 3): exactly, with the
// group's all-reduce in the tensor's own dtype, or through a codec (quantised pieces, summed in
// fp32, never re-quantised per hop: comm/quantized_all_reduce.h).
#pragma once

#include <memory>
#include <optional>

#include "loco/comm/codecs/codec.h"
#include "loco/comm/group.h"

namespace loco {

// The codec named `name` ("fp32" means exact: nullptr) with `block_size` values per scale.
std::unique_ptr<comm::Codec> exchange_codec(const std::string& name, std::int64_t block_size);

// Replaces `tensor` (host) by the mean over the group's replicas. With `weight`, replica m's tensor
// counts weight_m / Σ weight (0 leaves it out; docs/algorithm-reference.md §1 "weighted average", "dropped
// contributions") and one more scalar is all-reduced; returns Σ weight, or the group size without
// weights. When Σ weight is 0 the tensor is left at zero.
double replica_mean(comm::Group& group, torch::Tensor& tensor, const comm::Codec* codec,
                    std::optional<double> weight = std::nullopt);

}  // namespace loco
