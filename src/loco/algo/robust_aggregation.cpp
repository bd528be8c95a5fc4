#include "loco/algo/robust_aggregation.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "loco/util/error.h"

namespace loco {

namespace {

// ‖row_i‖₂ of whole vectors: this piece's sums of squares, completed over the other pieces.
std::vector<double> whole_norms(const torch::Tensor& rows, const SumOverPieces& sum_over_pieces) {
  torch::Tensor squares = rows.square().sum(1, /*keepdim=*/false, torch::kFloat64);
  sum_over_pieces(squares);
  std::vector<double> norms;
  for (std::int64_t i = 0; i < squares.numel(); ++i) norms.push_back(std::sqrt(squares[i].item<double>()));
  return norms;
}

// Σ w_i·s_i·row_i / Σ w_i, added in row order.
torch::Tensor weighted_mean(const torch::Tensor& rows, const std::vector<double>& weights,
                            const std::vector<double>& scales) {
  torch::Tensor sum = torch::zeros({rows.size(1)}, torch::kFloat64);
  double total = 0;
  for (std::int64_t i = 0; i < rows.size(0); ++i) {
    const auto w = weights[static_cast<std::size_t>(i)];
    sum.add_(rows[i].to(torch::kFloat64), w * scales[static_cast<std::size_t>(i)]);
    total += w;
  }
  return sum.div_(total).to(torch::kFloat32);
}

// Per coordinate, the values sorted across replicas: (M, n).
torch::Tensor sorted_columns(const torch::Tensor& rows) { return std::get<0>(rows.sort(0)); }

torch::Tensor coordinate_median(const torch::Tensor& rows) {
  const torch::Tensor sorted = sorted_columns(rows);
  const std::int64_t m = rows.size(0);
  if (m % 2 == 1) return sorted[m / 2].clone();
  return (sorted[m / 2 - 1].to(torch::kFloat64) + sorted[m / 2].to(torch::kFloat64)).div_(2).to(torch::kFloat32);
}

torch::Tensor trimmed_mean(const torch::Tensor& rows, std::int64_t trim) {
  const std::int64_t m = rows.size(0);
  const std::int64_t b = std::min(trim, (m - 1) / 2);
  return sorted_columns(rows).narrow(0, b, m - 2 * b).to(torch::kFloat64).mean(0).to(torch::kFloat32);
}

// In float32, with the sums of squares in float64: each of the L steps reads the (M, n) values about four
// times (the differences, their squares, the clipped sum as one matrix product).
torch::Tensor centered_clip(const torch::Tensor& rows, const AggregationConfig& config,
                            const SumOverPieces& sum_over_pieces) {
  const auto m = rows.size(0);
  torch::Tensor v = coordinate_median(rows);
  torch::Tensor differences = rows - v;
  const double tau = config.radius * median_of(whole_norms(differences, sum_over_pieces));
  torch::Tensor factors = torch::empty({1, m}, torch::kFloat32);
  for (std::int64_t iteration = 0; iteration < config.iterations; ++iteration) {
    if (iteration > 0) torch::sub_out(differences, rows, v);
    const std::vector<double> distances = whole_norms(differences, sum_over_pieces);
    for (std::int64_t i = 0; i < m; ++i) {
      const double d = distances[static_cast<std::size_t>(i)];
      factors[0][i] = static_cast<float>((d > tau ? tau / d : 1.0) / static_cast<double>(m));
    }
    v.add_(factors.mm(differences).squeeze(0));
  }
  return v;
}

}  // namespace

double median_of(std::vector<double> values) {
  LOCO_CHECK(!values.empty(), "the median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

std::string describe_aggregation(const AggregationConfig& config) {
  if (config.rule == "mean") return "";
  if (config.rule == "trimmed_mean") return fmt::format(" aggregation=trimmed_mean(b={})", config.trim);
  if (config.rule == "centered_clip") {
    return fmt::format(" aggregation=centered_clip(L={}, rho={})", config.iterations, config.radius);
  }
  return " aggregation=" + config.rule;
}

Aggregated aggregate(const AggregationConfig& config, const torch::Tensor& rows, const std::vector<double>& weights,
                     const SumOverPieces& sum_over_pieces) {
  torch::NoGradGuard no_grad;
  LOCO_CHECK(rows.dim() == 2 && rows.scalar_type() == torch::kFloat32, "aggregate needs (M, n) float32 rows");
  LOCO_CHECK(static_cast<std::int64_t>(weights.size()) == rows.size(0), "aggregate needs one weight per row");
  // A replica with a NaN or an infinity in any piece is left out by every rank alike.
  torch::Tensor broken = rows.isfinite().logical_not().any(1).to(torch::kFloat64);
  sum_over_pieces(broken);
  Aggregated out;
  std::vector<std::int64_t> taking_part;
  std::vector<double> taking_weights;
  for (std::int64_t i = 0; i < rows.size(0); ++i) {
    const double w = weights[static_cast<std::size_t>(i)];
    if (broken[i].item<double>() > 0) {
      out.rejected.push_back(static_cast<int>(i));
    } else if (w > 0) {
      taking_part.push_back(i);
      taking_weights.push_back(w);
      out.weight += w;
    }
  }
  const torch::Tensor used = rows.index_select(
      0, torch::from_blob(taking_part.data(), {static_cast<std::int64_t>(taking_part.size())}, torch::kInt64).clone());
  const std::vector<double> ones(taking_part.size(), 1.0);
  const std::string& rule = config.rule;
  // Every rank calls sum_over_pieces as often as every other: the rules that need norms ask for them even
  // when no replica takes part here.
  if (rule == "clip") {
    const std::vector<double> norms = whole_norms(used, sum_over_pieces);
    if (taking_part.empty()) {
      out.value = torch::zeros({rows.size(1)}, torch::kFloat32);
      return out;
    }
    const double c = median_of(norms);
    std::vector<double> scales;
    for (const double norm : norms) scales.push_back(norm > c ? c / norm : 1.0);
    out.value = weighted_mean(used, taking_weights, scales);
    return out;
  }
  if (rule == "centered_clip") {
    if (taking_part.empty()) {  // the same number of sums as the loop below
      for (std::int64_t k = 0; k <= config.iterations; ++k) whole_norms(used, sum_over_pieces);
      out.value = torch::zeros({rows.size(1)}, torch::kFloat32);
      return out;
    }
    out.value = centered_clip(used, config, sum_over_pieces);
    return out;
  }
  if (taking_part.empty()) {
    out.value = torch::zeros({rows.size(1)}, torch::kFloat32);
  } else if (rule == "mean") {
    out.value = weighted_mean(used, taking_weights, ones);
  } else if (rule == "trimmed_mean") {
    out.value = trimmed_mean(used, config.trim);
  } else if (rule == "median") {
    out.value = coordinate_median(used);
  } else {
    throw InternalError(fmt::format("unknown aggregation rule {}", rule));
  }
  return out;
}

}  // namespace loco
