#include "loco/algo/sparse_aggregation.h"

#include <algorithm>
#include <cstdint>

#include "loco/util/error.h"

namespace loco {

namespace {

void mean(bool over_contributors, const std::vector<const comm::SparseContribution*>& from,
          const std::vector<double>& factors, const comm::SparseTiling& tiling, float* out) {
  std::vector<std::uint32_t> senders(over_contributors ? tiling.numel() : 0, 0);
  for (std::size_t i = 0; i < from.size(); ++i) {
    // A factor of 1 leaves the sum the reference's plain float32 sum.
    const auto factor = static_cast<float>(factors[i]);
    const comm::SparseContribution& c = *from[i];
    for (std::size_t j = 0; j < c.tile_indices.size(); ++j) {
      const std::size_t flat = tiling.flat_index(j / tiling.k(), c.tile_indices[j]);
      out[flat] += factor * c.decoded(j);
      if (over_contributors) ++senders[flat];
    }
  }
  for (std::size_t x = 0; x < tiling.numel(); ++x) {
    const std::size_t d = over_contributors ? senders[x] : from.size();
    if (d > 0) out[x] /= static_cast<float>(d);
  }
}

// The coordinate-wise rules: per coordinate that any participant sent, its values (in participant order)
// and a 0 for each participant that did not send it; the coordinates none sent stay 0.
void coordinate_wise(std::size_t trim, bool median, const std::vector<const comm::SparseContribution*>& from,
                     const comm::SparseTiling& tiling, float* out) {
  std::vector<std::pair<std::uint64_t, float>> sent;
  for (const comm::SparseContribution* c : from) {
    for (std::size_t j = 0; j < c->tile_indices.size(); ++j)
      sent.emplace_back(tiling.flat_index(j / tiling.k(), c->tile_indices[j]), c->decoded(j));
  }
  std::stable_sort(sent.begin(), sent.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<float> values;
  for (std::size_t begin = 0; begin < sent.size();) {
    std::size_t end = begin;
    values.clear();
    while (end < sent.size() && sent[end].first == sent[begin].first) values.push_back(sent[end++].second);
    values.resize(from.size(), 0.0f);  // the participants that did not send it
    const std::size_t n = values.size();
    out[sent[begin].first] = trimmed_value(values, median ? (n - 1) / 2 : trim);
    begin = end;
  }
}

}  // namespace

float trimmed_value(std::vector<float>& values, std::size_t trim) {
  LOCO_CHECK(!values.empty(), "a coordinate-wise rule over no values");
  const std::size_t n = values.size();
  const std::size_t b = std::min(trim, (n - 1) / 2);
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (std::size_t i = b; i < n - b; ++i) sum += values[i];
  return static_cast<float>(sum / static_cast<double>(n - 2 * b));
}

void aggregate_sparse(const AggregationConfig& rule, bool over_contributors,
                      const std::vector<const comm::SparseContribution*>& from, const std::vector<double>& factors,
                      const comm::SparseTiling& tiling, float* out) {
  LOCO_CHECK(factors.size() == from.size(), "one factor per contribution");
  std::fill(out, out + tiling.numel(), 0.0f);
  if (from.empty()) return;
  if (rule.rule == "mean" || rule.rule == "clip") return mean(over_contributors, from, factors, tiling, out);
  if (rule.rule == "median" || rule.rule == "trimmed_mean") {
    return coordinate_wise(static_cast<std::size_t>(rule.trim), rule.rule == "median", from, tiling, out);
  }
  throw InternalError("dist.aggregation " + rule.rule + " has no sparse form");
}

}  // namespace loco
