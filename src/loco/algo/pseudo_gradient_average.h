// The average of the replicas' pseudo-gradients in an outer step of DiLoCo, Local SGD and Streaming DiLoCo
// (docs/algorithm-reference.md §1, §4 point 3, §11): the mean (replica_mean.h) or a robust rule
// (robust_aggregation.h), chosen by `dist.aggregation`, through the exchange's codec.
//
// What is checked (docs/security.md): with a robust rule every replica's values meet piece by piece
// (comm/piecewise_reduce.h), so each contribution is checked where it arrives: one with a NaN or an
// infinity anywhere is left out of the aggregate and reported by every replica. The mean is one all-reduce
// that sees no single contribution, so it is checked as a whole: an average that holds a NaN or an
// infinity (a replica diverged, or sent one) is not applied, and the outer step is skipped on every replica
// alike (the result of an all-reduce is the same everywhere).
#pragma once

#include <optional>
#include <vector>

#include "loco/algo/robust_aggregation.h"
#include "loco/comm/codecs/codec.h"
#include "loco/comm/group.h"

namespace loco {

struct PseudoGradientAverage {
  double weight = 0;          // Σ weight of the replicas whose Δ is in the average; 0: apply nothing
  std::vector<int> rejected;  // ranks whose Δ held a NaN or an infinity (robust rules), ascending
};

// Replaces `delta` (host float32) by the average over the group's replicas. `weight`: this replica's weight
// (0 leaves it out; nullopt: every replica counts 1, the mean is then a plain all-reduce). Rejections and a
// skipped average are logged on stderr, naming `what` (e.g. "the outer step after step 400").
PseudoGradientAverage average_pseudo_gradients(comm::Group& group, torch::Tensor& delta, const comm::Codec* codec,
                                               const AggregationConfig& aggregation, std::optional<double> weight,
                                               const std::string& what);

// The robust path on its own: `aggregation`'s rule over every replica's values, piece by piece, through
// `codec` (null: float32 as it is).
PseudoGradientAverage replica_aggregate(comm::Group& group, torch::Tensor& delta, const comm::Codec* codec,
                                        const AggregationConfig& aggregation, double weight);

}  // namespace loco
