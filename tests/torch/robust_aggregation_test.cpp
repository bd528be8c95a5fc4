// The robust aggregation rules (src/loco/algo/robust_aggregation.h, docs/algorithm-reference.md §11) on hand-computed
// cases: three replicas of which one is far off, two replicas, ties, a NaN, weights; then the same rules
// across ranks (algo/pseudo_gradient_average.h: piece by piece over a LocalGroup, through codecs), which
// must give what one call over every replica's whole vector gives.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "loco/algo/pseudo_gradient_average.h"
#include "loco/algo/robust_aggregation.h"
#include "loco/comm/local/local_group.h"

namespace loco {
namespace {

const SumOverPieces kOnePiece = [](torch::Tensor&) {};

AggregationConfig rule(const std::string& name, std::int64_t trim = 1, std::int64_t iterations = 20) {
  AggregationConfig config;
  config.rule = name;
  config.trim = trim;
  config.iterations = iterations;
  return config;
}

torch::Tensor rows(std::vector<std::vector<float>> values) {
  torch::Tensor out = torch::empty({static_cast<std::int64_t>(values.size()), static_cast<std::int64_t>(values[0].size())});
  for (std::size_t i = 0; i < values.size(); ++i) {
    for (std::size_t j = 0; j < values[i].size(); ++j) out[i][j] = values[i][j];
  }
  return out;
}

Aggregated aggregate_all(const AggregationConfig& config, const torch::Tensor& x, std::vector<double> weights = {}) {
  if (weights.empty()) weights.assign(static_cast<std::size_t>(x.size(0)), 1.0);
  return aggregate(config, x, weights, kOnePiece);
}

void expect_values(const torch::Tensor& actual, std::vector<double> expected, double tolerance = 1e-5) {
  ASSERT_EQ(actual.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[static_cast<std::int64_t>(i)].item<double>(), expected[i], tolerance) << "value " << i;
  }
}

// A = (1, 2), B = (3, 4), C = (100, −100): C is the bad replica.
const torch::Tensor kThree = rows({{1, 2}, {3, 4}, {100, -100}});

TEST(RobustAggregation, TheMeanFollowsTheBadReplica) {
  const Aggregated a = aggregate_all(rule("mean"), kThree);
  expect_values(a.value, {104.0 / 3, -94.0 / 3});
  EXPECT_DOUBLE_EQ(a.weight, 3);
  EXPECT_TRUE(a.rejected.empty());
}

// Per coordinate: sorted (1, 3, 100) and (−100, 2, 4).
TEST(RobustAggregation, MedianAndTrimmedMeanPerCoordinate) {
  expect_values(aggregate_all(rule("median"), kThree).value, {3, 2});
  expect_values(aggregate_all(rule("trimmed_mean", 1), kThree).value, {3, 2});
  // b = 2 needs M > 4: lowered to b = 1 for three replicas.
  expect_values(aggregate_all(rule("trimmed_mean", 2), kThree).value, {3, 2});
}

// Norms √5, 5, √20000; their median 5 clips C to (100, −100)·5/√20000 = (3.5355339, −3.5355339).
TEST(RobustAggregation, ClipScalesEachReplicaToTheMedianNorm) {
  const double c = 5 / std::sqrt(20000.0);
  expect_values(aggregate_all(rule("clip"), kThree).value, {(1 + 3 + 100 * c) / 3, (2 + 4 - 100 * c) / 3});
}

// v0 = the median (3, 2); distances 2, 2, √19813; τ = 2. One step:
// v = (3, 2) + ((−2, 0) + (0, 2) + (97, −102)·2/√19813) / 3 = (2.7927485, 2.1835703).
// Twenty steps (numpy, the same formula): (2.6893038, 2.2755276).
TEST(RobustAggregation, CenteredClipStartsAtTheMedianAndClipsTheOutlier) {
  const double f = 2 / std::sqrt(19813.0);
  expect_values(aggregate_all(rule("centered_clip", 1, 1), kThree).value, {3 + (-2 + 97 * f) / 3, 2 + (2 - 102 * f) / 3});
  expect_values(aggregate_all(rule("centered_clip"), kThree).value, {2.6893038239, 2.2755276137});
}

// Two replicas: the median and the trimmed mean (b lowered to 0) are the mean; clip takes the median of two
// norms, (√5 + 5)/2, which scales (3, −4) by 0.7236068; centered clip stays at the mean.
TEST(RobustAggregation, TwoReplicas) {
  const torch::Tensor two = rows({{1, 2}, {3, -4}});
  for (const std::string name : {"mean", "median", "trimmed_mean", "centered_clip"}) {
    expect_values(aggregate_all(rule(name), two).value, {2, -1});
  }
  const double s = (std::sqrt(5.0) + 5) / 2 / 5;
  expect_values(aggregate_all(rule("clip"), two).value, {(1 + 3 * s) / 2, (2 - 4 * s) / 2});
}

// Ties: sorted columns (2, 2, 2, 9) and (−1, 5, 5, 5). Trimming drops one tied value and the outlier.
TEST(RobustAggregation, Ties) {
  const torch::Tensor tied = rows({{2, 5}, {2, 5}, {9, -1}, {2, 5}});
  expect_values(aggregate_all(rule("median"), tied).value, {2, 5});
  expect_values(aggregate_all(rule("trimmed_mean"), tied).value, {2, 5});
  // Equal norms: nobody is clipped.
  expect_values(aggregate_all(rule("clip"), rows({{3, 4}, {4, 3}, {0, 5}})).value, {7.0 / 3, 4});
}

// A replica with a NaN or an infinity is left out and reported by every rule; weight 0 leaves one out
// silently; the mean and clip average with the weights.
TEST(RobustAggregation, BrokenAndWeightlessReplicasAreLeftOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const torch::Tensor x = rows({{1, 2}, {nan, 0}, {3, 4}, {0, inf}});
  const double s = (std::sqrt(5.0) + 5) / 2 / 5;  // clip: (3, 4) scaled to the median of the norms √5 and 5
  for (const std::string name : {"mean", "clip", "trimmed_mean", "median", "centered_clip"}) {
    const Aggregated a = aggregate_all(rule(name), x);
    if (name == "clip") {
      expect_values(a.value, {(1 + 3 * s) / 2, (2 + 4 * s) / 2});
    } else {
      expect_values(a.value, {2, 3});
    }
    EXPECT_EQ(a.rejected, (std::vector<int>{1, 3})) << name;
    EXPECT_DOUBLE_EQ(a.weight, 2) << name;
  }
  const Aggregated weighted = aggregate_all(rule("mean"), rows({{0, 0}, {4, 8}, {100, 100}}), {1, 3, 0});
  expect_values(weighted.value, {3, 6});
  EXPECT_DOUBLE_EQ(weighted.weight, 4);
  EXPECT_TRUE(weighted.rejected.empty());
  const Aggregated nobody = aggregate_all(rule("median"), rows({{nan, 1}}));
  expect_values(nobody.value, {0, 0});
  EXPECT_DOUBLE_EQ(nobody.weight, 0);
}

// Four ranks, each holding its own Δ of 37 values (pieces of unequal sizes); replica 2 is off by ×100.
// Piece by piece over the group the rules give what one call over the whole vectors gives, through fp32
// and through a 4-bit codec (then: on the decoded values, and the result re-encoded once).
TEST(RobustAggregation, AcrossRanksPieceByPieceAsOverWholeVectors) {
  constexpr int kRanks = 4;
  constexpr std::int64_t kValues = 37;
  torch::manual_seed(3);
  torch::Tensor all = torch::randn({kRanks, kValues});
  all[2].mul_(100);
  for (const std::string codec_name : {"fp32", "fp4"}) {
    const auto codec = comm::make_codec(codec_name, 8);
    const auto roundtrip = [&](const torch::Tensor& values) {
      torch::Tensor v = values.contiguous().clone();
      std::vector<std::uint8_t> bytes(codec->encoded_bytes(static_cast<std::size_t>(v.numel())));
      codec->encode(v.data_ptr<float>(), static_cast<std::size_t>(v.numel()), bytes.data());
      codec->decode(bytes.data(), static_cast<std::size_t>(v.numel()), v.data_ptr<float>());
      return v;
    };
    torch::Tensor decoded = torch::empty_like(all);
    for (int r = 0; r < kRanks; ++r) decoded[r] = roundtrip(all[r]);
    for (const std::string name : {"clip", "trimmed_mean", "median", "centered_clip"}) {
      const torch::Tensor expected = roundtrip(aggregate_all(rule(name), decoded).value);
      comm::run_local_replicas(kRanks, [&](comm::Group& group) {
        torch::Tensor mine = all[group.rank()].clone();
        const PseudoGradientAverage a =
            replica_aggregate(group, mine, codec_name == "fp32" ? nullptr : codec.get(), rule(name), 1.0);
        EXPECT_DOUBLE_EQ(a.weight, kRanks);
        EXPECT_TRUE(torch::allclose(mine, expected, 1e-5, 1e-6))
            << name << " through " << codec_name << " on rank " << group.rank() << ": " << (mine - expected).abs().max();
      });
    }
  }
}

// A rank whose Δ holds a NaN is left out by every rank, though only the rank holding that piece sees it.
TEST(RobustAggregation, ANaNSeenInOnePieceLeavesTheReplicaOutEverywhere) {
  comm::run_local_replicas(3, [](comm::Group& group) {
    torch::Tensor mine = torch::full({10}, static_cast<float>(group.rank() + 1));
    if (group.rank() == 1) mine[9] = std::numeric_limits<float>::quiet_NaN();  // in the last rank's piece
    const PseudoGradientAverage a = replica_aggregate(group, mine, nullptr, rule("median"), 1.0);
    EXPECT_EQ(a.rejected, std::vector<int>{1});
    EXPECT_DOUBLE_EQ(a.weight, 2);
    EXPECT_TRUE(torch::equal(mine, torch::full({10}, 2.0f))) << mine;  // the median of 1 and 3
  });
}

// The mean is one all-reduce: an average holding a NaN is not applied (weight 0 on every replica).
TEST(RobustAggregation, AMeanHoldingANaNIsNotApplied) {
  comm::run_local_replicas(2, [](comm::Group& group) {
    torch::Tensor mine = torch::ones({4});
    if (group.rank() == 0) mine[0] = std::numeric_limits<float>::infinity();
    const PseudoGradientAverage a = average_pseudo_gradients(group, mine, nullptr, rule("mean"), std::nullopt, "test");
    EXPECT_DOUBLE_EQ(a.weight, 0);
    torch::Tensor clean = torch::full({4}, 2.0f);
    EXPECT_DOUBLE_EQ(average_pseudo_gradients(group, clean, nullptr, rule("mean"), std::nullopt, "test").weight, 2);
  });
}

}  // namespace
}  // namespace loco
