// Robust aggregation of pseudo-gradients (docs/algorithm-reference.md §11): the rule that replaces the mean of
// the replicas' Δ in the outer step of DiLoCo, Local SGD and Streaming DiLoCo (`dist.aggregation`), for
// runs where a replica may be broken or hostile. Over the M replicas that take part (weight > 0, every
// value of their Δ finite):
//
//   mean           Δ = Σ w_i·Δ_i / Σ w_i
//   clip           c = median_i ‖Δ_i‖₂;  Δ_i ← Δ_i · min(1, c / ‖Δ_i‖₂);  Δ = Σ w_i·Δ_i / Σ w_i   (Templar's)
//   trimmed_mean   per coordinate: sort the M values, drop the b smallest and the b largest, average the
//                  M − 2b left (b = dist.trim; lowered to ⌊(M − 1)/2⌋ when M ≤ 2b, so that one stays)
//   median         per coordinate; for even M the mean of the two middle values
//   centered_clip  v ← the coordinate-wise median;  τ = ρ · median_i ‖Δ_i − v‖₂  (ρ = dist.clip_radius);
//                  L times (dist.clip_iterations):  v ← v + (1/M) Σ_i (Δ_i − v) · min(1, τ / ‖Δ_i − v‖₂)
//                  (Karimireddy et al. 2021; BTARD). Δ = v.
//
// The medians of norms are medians of M numbers (for even M, the mean of the two middle ones). The
// coordinate-wise rules use the weights only to leave replicas out. A replica whose Δ holds a NaN or an
// infinity anywhere is left out and reported (`rejected`), whatever the rule.
//
// Pieces: the rules run where every replica's values meet, one piece of the coordinates per rank
// (comm/piecewise_reduce.h), but norms are of whole vectors: `sum_over_pieces` sums a few float64 values
// over the ranks that hold the other pieces (an all-reduce; the identity when one piece is everything). It
// is called the same number of times on every rank, whatever the values.
#pragma once

#include <torch/types.h>

#include "loco/config/run_config.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loco {

// In place, over the ranks that hold the other pieces: values ← their sum.
using SumOverPieces = std::function<void(torch::Tensor& values)>;

struct Aggregated {
  torch::Tensor value;        // (n) float32: this piece of the aggregate
  std::vector<int> rejected;  // replicas left out for a NaN or an infinity, ascending
  double weight = 0;          // Σ w_i over the replicas that took part (0: none; value is then zero)
};

// The median of a few numbers (norms); for an even count, the mean of the two middle ones.
double median_of(std::vector<double> values);

// For logs: "" for the mean, " aggregation=clip", " aggregation=trimmed_mean(b=1)", ...
std::string describe_aggregation(const AggregationConfig& config);

// `rows`: (M, n) float32, row i = replica i's values for this piece; `weights`: M values ≥ 0.
Aggregated aggregate(const AggregationConfig& config, const torch::Tensor& rows, const std::vector<double>& weights,
                     const SumOverPieces& sum_over_pieces);

}  // namespace loco
