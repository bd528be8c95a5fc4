// How SparseLoCo combines the replicas' sparse contributions to one tensor (docs/algorithm-reference.md
// §12): the contributions' index sets differ, so every rule says which values meet at a coordinate. Over
// the P participants i (the replicas that take part, each counting once: sparse_exchange.h):
//
//   mean           Σ_{i sent c} f_i·v_i(c) / D(c),  D(c) = the replicas that sent c (contributors) or P
//                  (replicas); summed in float32 in replica order; f_i = 1
//   clip           the mean with f_i = min(1, median_j ‖s_j‖₂ / ‖s_i‖₂), the norms of whole contributions
//                  (every tensor of the fragment: the caller computes f)
//   trimmed_mean   per coordinate over every participant's value, 0 for one that did not send it (the
//                  sparse vector's own value there): sorted, b = dist.trim dropped at each end (lowered to
//                  ⌊(n − 1)/2⌋ when n ≤ 2b), the rest averaged
//   median         per coordinate over the same values; for an even count the mean of the two middle ones
//
// `over_contributors` (sparseloco.average = "contributors", the reference code's) applies to the mean and
// clip only. The coordinate-wise rules never take the contributors alone: a coordinate only a bad replica
// sent would be its own median, and a replica's top-k is mostly coordinates the others did not choose
// (measured: the median over contributors let a replica sending 100 times its accumulator through, loss
// +521%; docs/results.md "SparseLoCo").
//
// A coordinate no value reaches is 0. centered_clip starts from a median of every replica's full vector
// and is refused with SparseLoCo (config/strategy_checks.cpp).
#pragma once

#include <vector>

#include "loco/comm/codecs/sparse_topk.h"
#include "loco/config/run_config.h"

namespace loco {

// `from[i]`: participant i's decoded contribution, `factors[i]` its factor (clip's, else 1). Writes the
// tensor's tiling.numel() aggregated values to `out`.
void aggregate_sparse(const AggregationConfig& rule, bool over_contributors,
                      const std::vector<const comm::SparseContribution*>& from, const std::vector<double>& factors,
                      const comm::SparseTiling& tiling, float* out);

// The coordinate-wise rules' value of one coordinate: `values` sorted in place, b dropped at each end as
// above (trimmed_mean with trim b; the median is trim ⌊(n − 1)/2⌋), the rest averaged in double.
float trimmed_value(std::vector<float>& values, std::size_t trim);

}  // namespace loco
