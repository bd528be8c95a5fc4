#include "loco/algo/pseudo_gradient_average.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>

#include "loco/algo/replica_mean.h"
#include "loco/comm/piecewise_reduce.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"

namespace loco {

PseudoGradientAverage replica_aggregate(comm::Group& group, torch::Tensor& delta, const comm::Codec* codec,
                                        const AggregationConfig& aggregation, double weight) {
  torch::NoGradGuard no_grad;
  // Every replica's weight, in rank order: each rank aggregates its piece over all of them.
  const torch::Tensor weights_gathered = torch::empty({group.size()}, torch::kFloat64);
  group.all_gather(torch::full({1}, weight, torch::kFloat64), weights_gathered);
  const double* w = weights_gathered.data_ptr<double>();
  const std::vector<double> weights(w, w + group.size());
  std::unique_ptr<comm::Codec> as_is;
  if (codec == nullptr) as_is = comm::make_codec("fp32", 1);
  const comm::Codec& through = codec != nullptr ? *codec : *as_is;
  // Codecs work on float32; float64 runs (parity tests) round-trip through it.
  torch::Tensor values = delta.scalar_type() == torch::kFloat32 ? delta : delta.to(torch::kFloat32);
  PseudoGradientAverage out;
  comm::piecewise_reduce(group, values, through, [&](const comm::PieceContributions& from, float* result) {
    torch::Tensor rows = torch::empty({from.count, from.values}, torch::kFloat32);
    for (int source = 0; source < from.count; ++source) {
      through.decode(from.bytes + source * from.piece_bytes, static_cast<std::size_t>(from.values),
                     rows[source].data_ptr<float>());
    }
    const Aggregated piece = aggregate(aggregation, rows, weights, [&](torch::Tensor& sums) {
      group.all_reduce(sums, comm::ReduceOp::sum);
    });
    std::copy_n(piece.value.data_ptr<float>(), from.values, result);
    out.weight = piece.weight;  // the same on every rank: from every replica's weight and every piece's check
    out.rejected = piece.rejected;
  });
  if (!values.is_same(delta)) delta.copy_(values);
  return out;
}

PseudoGradientAverage average_pseudo_gradients(comm::Group& group, torch::Tensor& delta, const comm::Codec* codec,
                                               const AggregationConfig& aggregation, std::optional<double> weight,
                                               const std::string& what) {
  if (aggregation.rule != "mean") {
    PseudoGradientAverage out = replica_aggregate(group, delta, codec, aggregation, weight.value_or(1.0));
    if (!out.rejected.empty()) {
      loco::print_unchecked(stderr, "{}: the pseudo-gradient of replica(s) {} held NaN or Inf; left out of the {}\n",
                            what, fmt::join(out.rejected, ", "), aggregation.rule);
    }
    return out;
  }
  PseudoGradientAverage out{replica_mean(group, delta, codec, weight), {}};
  if (out.weight > 0 && !delta.isfinite().all().item<bool>()) {
    loco::print_unchecked(stderr,
                          "{}: the mean of the pseudo-gradients holds NaN or Inf (a replica diverged, or sent one); "
                          "not applied. A robust dist.aggregation (clip, for one) checks each replica's and leaves "
                          "such a replica out\n",
                          what);
    out.weight = 0;
  }
  return out;
}

}  // namespace loco
