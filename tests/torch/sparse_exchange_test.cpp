// SparseLoCo's aggregation and exchange (src/loco/algo/sparse_aggregation.h, sparse_exchange.h): rounds of
// the exchange across the replicas of a LocalGroup, then the outer step, against the Python transcription
// (tests/reference/sparseloco_ref.py, the fixture of tests/reference/make_sparseloco_fixture.py: every
// replica's accumulator and θ after each round); every rule on hand-computed contributions whose index sets
// differ; the exchange against the codec's own functions, its exact bytes, what a left-out, a healed and a
// hostile replica do to the accumulator and the average.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "loco/algo/sparse_aggregation.h"
#include "loco/algo/sparse_exchange.h"
#include "loco/comm/local/local_group.h"
#include "loco/io/safetensors.h"

namespace loco {
namespace {

using comm::SparseContribution;
using comm::SparseTiling;

AggregationConfig rule(const std::string& name, std::int64_t trim = 1) {
  AggregationConfig config;
  config.rule = name;
  config.trim = trim;
  return config;
}

// One tile of 8 values, 2 sent: `values` decode exactly (lookup holds them, shift 0).
SparseContribution sent(std::uint16_t i, float a, std::uint16_t j, float b) {
  SparseContribution c;
  c.tile_indices = {i, j};
  c.codes = {0, 1};
  c.lookup = {a, b, 0, 0};
  c.shift = 0;
  return c;
}

// Every fixture case: its tensors as one fragment, `rounds` exchanges among its replicas, each followed by
// θ ← θ − η·Δ̄. A flipped sign, a dropped residual, a wrong tile or a mean over all replicas instead of the
// contributors moves the accumulators or θ compared here.
TEST(SparseExchange, RoundsAndOuterStepsMatchThePythonTranscription) {
  const SafetensorsContent fixture = load_safetensors(std::string(LOCO_FIXTURE_DIR) + "/sparseloco.safetensors");
  const auto cases = nlohmann::json::parse(fixture.metadata.at("cases"));
  const auto tensor = [&](const std::string& name) { return fixture.tensors.at(name).reshape({-1}); };
  for (const auto& [name, c] : cases.items()) {
    std::vector<std::string> tensors;
    std::vector<std::vector<std::int64_t>> shapes;
    for (const auto& [t, shape] : c.at("shapes").items()) {
      tensors.push_back(t);
      shapes.push_back(shape.get<std::vector<std::int64_t>>());
    }
    // The fragment's values in the order of `tensors`.
    const auto fragment = [&](const std::function<std::string(const std::string&)>& key) {
      std::vector<torch::Tensor> parts;
      for (const auto& t : tensors) parts.push_back(tensor(key(t)));
      return torch::cat(parts);
    };
    SparseSettings settings;
    settings.beta = c.at("beta").get<double>();
    settings.topk = c.at("k").get<std::size_t>();
    settings.bits = c.at("bits").get<int>();
    const SparseLayout layout(shapes, settings);
    const int replicas = c.at("replicas");
    const auto eta = c.at("eta").get<float>();
    std::vector<torch::Tensor> accumulators(replicas, torch::zeros({layout.numel()}));
    torch::Tensor theta = fragment([&](const std::string& t) { return fmt::format("{}/theta0/{}", name, t); });
    for (int round = 0; round < c.at("rounds").get<int>(); ++round) {
      std::vector<torch::Tensor> averages(replicas);
      comm::run_local_replicas(replicas, [&](comm::Group& group) {
        const int r = group.rank();
        torch::Tensor delta =
            fragment([&](const std::string& t) { return fmt::format("{}/delta/{}/{}/{}", name, round, r, t); });
        SparseRound result = sparse_exchange(group, layout, settings, rule("mean"), accumulators[r], delta, 1.0, true,
                                             "fixture");
        accumulators[r] = result.accumulator;
        averages[r] = delta;
      });
      for (int r = 0; r < replicas; ++r) {
        const torch::Tensor want =
            fragment([&](const std::string& t) { return fmt::format("{}/e/{}/{}/{}", name, round, r, t); });
        EXPECT_TRUE(torch::allclose(accumulators[r], want, 2e-6, 2e-6)) << name << " round " << round << " e " << r;
        EXPECT_TRUE(torch::equal(averages[r], averages[0])) << "every replica applies the same average";
      }
      theta = theta - averages[0].mul(eta);
      const torch::Tensor want =
          fragment([&](const std::string& t) { return fmt::format("{}/theta/{}/{}", name, round, t); });
      EXPECT_TRUE(torch::allclose(theta, want, 2e-6, 2e-6)) << name << " theta after round " << round;
    }
  }
}

// A = {1: 2, 5: −4}, B = {1: 4, 6: 1}, C = {1: 100, 5: −100}.
const SparseTiling kTile({8}, 2);
const SparseContribution kA = sent(1, 2, 5, -4), kB = sent(1, 4, 6, 1), kC = sent(1, 100, 5, -100);

std::vector<float> combine(const AggregationConfig& config, bool over_contributors,
                           std::vector<double> factors = {1, 1, 1}) {
  std::vector<float> out(8, -7.0f);  // overwritten everywhere
  aggregate_sparse(config, over_contributors, {&kA, &kB, &kC}, factors, kTile, out.data());
  return out;
}

void expect_values(const std::vector<float>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-5) << "value " << i;
}

TEST(SparseAggregation, TheMeanOverContributorsOrOverEveryReplica) {
  expect_values(combine(rule("mean"), true), {0, 106.0 / 3, 0, 0, 0, -52, 1, 0});
  expect_values(combine(rule("mean"), false), {0, 106.0 / 3, 0, 0, 0, -104.0 / 3, 1.0 / 3, 0});
}

TEST(SparseAggregation, ClipScalesEachContributionByItsFactor) {
  // C scaled by 0.1: coordinate 1 (2 + 4 + 10) / 3, coordinate 5 (−4 − 10) / 2.
  expect_values(combine(rule("clip"), true, {1, 1, 0.1}), {0, 16.0 / 3, 0, 0, 0, -7, 1, 0});
}

TEST(SparseAggregation, CoordinateWiseRulesTakeEveryReplicasValue) {
  // Absent values are 0, so coordinate 1 has (2, 4, 100), 5 has (−4, 0, −100) and 6 has (0, 1, 0): C alone
  // cannot set coordinate 5, whether or not the mean is over the contributors.
  for (const bool over_contributors : {true, false}) {
    expect_values(combine(rule("median"), over_contributors), {0, 4, 0, 0, 0, -4, 0, 0});
    expect_values(combine(rule("trimmed_mean"), over_contributors), {0, 4, 0, 0, 0, -4, 0, 0});
  }
  // Only C sent coordinate 2: its median is 0, not C's value.
  const SparseContribution lone = sent(2, 1000, 7, 1);
  std::vector<float> out(8);
  aggregate_sparse(rule("median"), true, {&kA, &kB, &lone}, {1, 1, 1}, kTile, out.data());
  EXPECT_EQ(out[2], 0.0f);
  std::vector<float> four = {5, -1, 3, 100};
  EXPECT_FLOAT_EQ(trimmed_value(four, 1), 4);  // (3 + 5) / 2
  std::vector<float> two = {5, -1};
  EXPECT_FLOAT_EQ(trimmed_value(two, 1), 2);  // b lowered to 0: one value must stay
}

// Three ranks of a LocalGroup, two tensors (a 2 x 8 matrix in tiles of 16, and a vector of 8).
const std::vector<std::vector<std::int64_t>> kShapes = {{2, 8}, {8}};
constexpr float kBeta = 0.5f;

SparseSettings settings() {
  SparseSettings s;
  s.beta = kBeta;
  s.topk = 4;
  s.bits = 2;
  return s;
}

// The layout names the k a tile sends: an odd sparseloco.topk is rounded down to even (the codec's packing), and
// said so (it was named as given: "top-5" for a run that sent 4 values per tile).
TEST(SparseExchange, TheLayoutNamesTheValuesATileSends) {
  SparseSettings odd = settings();
  odd.topk = 5;
  const std::string said = SparseLayout({{64, 64}}, odd).describe();
  EXPECT_EQ(said.rfind("top-4 (sparseloco.topk = 5 rounded down to even) per tile of up to 64x64 (0.10% of", 0), 0u)
      << said;
  EXPECT_EQ(SparseLayout({{64, 64}}, settings()).describe().rfind("top-4 per tile of up to 64x64 (0.10% of", 0), 0u);
}

torch::Tensor deterministic(int rank, float scale) {
  return torch::arange(24, torch::kFloat32).mul(0.37f * static_cast<float>(rank + 1)).sin().mul(scale);
}

TEST(SparseExchange, EveryRankGetsTheAggregateOfTheCodecsContributions) {
  const SparseLayout layout(kShapes, settings());
  ASSERT_EQ(layout.numel(), 24);
  std::vector<torch::Tensor> averages(3), accumulators(3);
  std::vector<SparseRound> rounds(3);
  std::vector<std::uint64_t> bytes(3);
  comm::run_local_replicas(3, [&](comm::Group& group) {
    const int r = group.rank();
    torch::Tensor delta = deterministic(r, 1.0f);
    rounds[r] = sparse_exchange(group, layout, settings(), rule("mean"), deterministic(r + 3, 0.5f), delta, 1.0,
                                true, "test");
    averages[r] = delta;
    bytes[r] = group.stats().bytes_sent;
  });
  // What the codec's functions give for each replica, and the mean over the replicas that sent a value.
  std::vector<std::vector<SparseContribution>> expected(3);
  for (int r = 0; r < 3; ++r) {
    torch::Tensor e = deterministic(r + 3, 0.5f).clone();
    const torch::Tensor d = deterministic(r, 1.0f);
    for (std::size_t t = 0; t < 2; ++t) {
      expected[r].push_back(comm::sparse_error_feedback(e.data_ptr<float>() + layout.offset(t),
                                                        d.data_ptr<float>() + layout.offset(t), kBeta,
                                                        layout.tilings()[t], 2));
    }
    EXPECT_TRUE(torch::equal(rounds[r].accumulator, e)) << "rank " << r;
  }
  torch::Tensor mean = torch::zeros({24});
  for (std::size_t t = 0; t < 2; ++t) {
    aggregate_sparse(rule("mean"), true, {&expected[0][t], &expected[1][t], &expected[2][t]}, {1, 1, 1},
                     layout.tilings()[t], mean.data_ptr<float>() + layout.offset(t));
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(torch::equal(averages[r], mean)) << "rank " << r;
    EXPECT_DOUBLE_EQ(rounds[r].averaged.weight, 3);
    EXPECT_TRUE(rounds[r].averaged.rejected.empty());
    // A ring all-gather: each rank sends its payload to the two others.
    EXPECT_EQ(bytes[r], 2 * layout.payload_bytes()) << "rank " << r;
  }
  EXPECT_GT(mean.abs().sum().item<float>(), 0);
}

TEST(SparseExchange, ALeftOutReplicaCarriesEverythingAndAHealedOneStartsAfresh) {
  const SparseLayout layout(kShapes, settings());
  std::vector<SparseRound> rounds(3);
  std::vector<torch::Tensor> averages(3);
  comm::run_local_replicas(3, [&](comm::Group& group) {
    const int r = group.rank();
    torch::Tensor delta = deterministic(r, 1.0f);
    // Rank 1 is left out (weight 0); rank 2 just adopted a donor's state.
    rounds[r] = sparse_exchange(group, layout, settings(), rule("mean"), deterministic(r + 3, 0.5f), delta,
                                r == 1 ? 0.0 : 1.0, r != 2, "test");
    averages[r] = delta;
  });
  EXPECT_TRUE(torch::equal(rounds[1].accumulator, deterministic(4, 0.5f) * kBeta + deterministic(1, 1.0f)));
  EXPECT_TRUE(torch::equal(rounds[2].accumulator, torch::zeros({24})));
  for (int r = 0; r < 3; ++r) EXPECT_DOUBLE_EQ(rounds[r].averaged.weight, 1) << "only rank 0 counts";
  // The average is rank 0's contribution alone: what rank 0 took out of its accumulator.
  const torch::Tensor sent0 = deterministic(3, 0.5f) * kBeta + deterministic(0, 1.0f) - rounds[0].accumulator;
  EXPECT_TRUE(torch::allclose(averages[1], sent0, 1e-6, 1e-6));
}

// Rank 2 sends bytes no honest replica sends: every rank leaves it out and names it, and the two others'
// average is what they alone give.
TEST(SparseExchange, AContributionThatDoesNotDecodeIsRefusedByEveryRank) {
  const SparseLayout layout(kShapes, settings());
  const auto hostile = [&](const std::function<void(std::uint8_t*)>& spoil) {
    std::vector<torch::Tensor> averages(3);
    std::vector<SparseRound> rounds(3);
    comm::run_local_replicas(3, [&](comm::Group& group) {
      const int r = group.rank();
      torch::Tensor delta = deterministic(r, 1.0f);
      if (r < 2) {
        rounds[r] = sparse_exchange(group, layout, settings(), rule("mean"), torch::zeros({24}), delta, 1.0, true, "t");
        averages[r] = delta;
        return;
      }
      // An honest payload of rank 2's, spoilt, sent through the same all-gather.
      torch::Tensor payload = torch::zeros({static_cast<std::int64_t>(layout.payload_bytes())}, torch::kUInt8);
      std::uint8_t* p = payload.data_ptr<std::uint8_t>();
      const double weight = 1.0;
      std::memcpy(p, &weight, sizeof weight);
      torch::Tensor e = torch::zeros({24});
      std::size_t at = sizeof weight;
      for (std::size_t t = 0; t < 2; ++t) {
        const SparseContribution s = comm::sparse_error_feedback(e.data_ptr<float>() + layout.offset(t),
                                                                 delta.data_ptr<float>() + layout.offset(t), kBeta,
                                                                 layout.tilings()[t], 2);
        comm::sparse_encode(s, layout.tilings()[t], 2, p + at);
        at += layout.encoded_bytes(t);
      }
      spoil(p);
      torch::Tensor gathered = torch::empty({3 * payload.numel()}, torch::kUInt8);
      group.all_gather(payload, gathered);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(rounds[r].averaged.rejected, std::vector<int>{2}) << "rank " << r;
      EXPECT_DOUBLE_EQ(rounds[r].averaged.weight, 2);
    }
    EXPECT_TRUE(torch::equal(averages[0], averages[1]));
    return averages[0];
  };
  const torch::Tensor nan_lookup = hostile([](std::uint8_t* p) {
    const float nan = std::nanf("");
    std::memcpy(p + sizeof(double) + sizeof(float), &nan, sizeof nan);  // the first tensor's lookup[0]
  });
  const torch::Tensor negative_weight = hostile([](std::uint8_t* p) {
    const double weight = -1;
    std::memcpy(p, &weight, sizeof weight);
  });
  EXPECT_TRUE(torch::equal(nan_lookup, negative_weight));
  // A weight that would outweigh the others: honest replicas send 1 or 0.
  const torch::Tensor heavy = hostile([](std::uint8_t* p) {
    const double weight = 1e300;
    std::memcpy(p, &weight, sizeof weight);
  });
  EXPECT_TRUE(torch::equal(nan_lookup, heavy));
  // Without rank 2 the two honest ranks' own exchange gives the same average.
  std::vector<torch::Tensor> pair(2);
  comm::run_local_replicas(2, [&](comm::Group& group) {
    torch::Tensor delta = deterministic(group.rank(), 1.0f);
    sparse_exchange(group, layout, settings(), rule("mean"), torch::zeros({24}), delta, 1.0, true, "t");
    pair[group.rank()] = delta;
  });
  EXPECT_TRUE(torch::equal(nan_lookup, pair[0]));
}

// A replica whose Δ holds a NaN sends it, is refused by every rank, and restarts its accumulator at 0.
TEST(SparseExchange, AReplicaThatDivergedIsRefusedAndStartsItsAccumulatorAfresh) {
  const SparseLayout layout(kShapes, settings());
  std::vector<SparseRound> rounds(2);
  comm::run_local_replicas(2, [&](comm::Group& group) {
    torch::Tensor delta = deterministic(group.rank(), 1.0f);
    if (group.rank() == 1) delta[3] = std::nanf("");
    rounds[group.rank()] =
        sparse_exchange(group, layout, settings(), rule("mean"), torch::ones({24}), delta, 1.0, true, "t");
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(rounds[r].averaged.rejected, std::vector<int>{1}) << "rank " << r;
  EXPECT_TRUE(torch::equal(rounds[1].accumulator, torch::zeros({24})));
  EXPECT_TRUE(torch::isfinite(rounds[0].accumulator).all().item<bool>());
}

}  // namespace
}  // namespace loco
