// BatchSampler: deterministic, disjoint across replicas, resumable; and the portable shuffle.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loco/data/batch_sampler.h"
#include "loco/data/shuffle.h"
#include "loco/util/error.h"
#include "support/test_support.h"
#include "unit/data_test_helpers.h"

namespace loco::data {
namespace {

using test::ScratchDir;

constexpr std::int64_t kSeqLen = 4;

// A train split of 103 positional tokens over two shards: W = (103 - 1) / 4 = 25 windows.
class DataSampler : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_positional_dataset(dir_.path(), {60, 43}, 9);
    data_ = std::make_unique<TokenDataset>(TokenDataset::open(dir_.path(), "train"));
  }

  BatchSampler sampler(std::uint64_t seed, std::int64_t replica = 0, std::int64_t replicas = 1, bool shuffle = true) {
    return BatchSampler(*data_, kSeqLen, seed, replica, replicas, shuffle);
  }

  // The windows of the next `count` rows, drawn as one batch. With positional tokens the first
  // input of a row is window * seq_len, and every target is its input + 1.
  static std::vector<std::uint64_t> draw(BatchSampler& sampler, std::int64_t count) {
    std::vector<std::int64_t> inputs(count * kSeqLen), targets(count * kSeqLen);
    sampler.next_batch(count, inputs.data(), targets.data());
    std::vector<std::uint64_t> windows;
    for (std::int64_t row = 0; row < count; ++row) {
      const std::int64_t* in = &inputs[row * kSeqLen];
      EXPECT_EQ(in[0] % kSeqLen, 0) << "windows start at multiples of seq_len";
      for (std::int64_t t = 0; t < kSeqLen; ++t) {
        EXPECT_EQ(in[t], in[0] + t);
        EXPECT_EQ(targets[row * kSeqLen + t], in[t] + 1);
      }
      windows.push_back(static_cast<std::uint64_t>(in[0] / kSeqLen));
    }
    return windows;
  }

  ScratchDir dir_;
  std::unique_ptr<TokenDataset> data_;
};

TEST_F(DataSampler, SameSeedGivesTheSameStream) {
  BatchSampler a = sampler(7), b = sampler(7);
  EXPECT_EQ(draw(a, 60), draw(b, 60));
}

TEST_F(DataSampler, DifferentSeedsGiveDifferentStreams) {
  BatchSampler a = sampler(7), b = sampler(8);
  EXPECT_NE(draw(a, 25), draw(b, 25));
}

TEST_F(DataSampler, OneReplicaSeesEveryWindowOncePerEpoch) {
  BatchSampler s = sampler(3);
  ASSERT_EQ(s.windows_per_epoch(), 25u);
  std::vector<std::uint64_t> epoch0 = draw(s, 25);
  std::vector<std::uint64_t> epoch1 = draw(s, 25);
  EXPECT_NE(epoch0, epoch1) << "each epoch has its own order";
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  std::vector<std::uint64_t> all(25);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(epoch0, all);
  EXPECT_EQ(epoch1, all);
}

TEST_F(DataSampler, ReplicasAreDisjointWithinAnEpoch) {
  const std::int64_t replicas = 3;
  std::set<std::uint64_t> seen;
  for (std::int64_t r = 0; r < replicas; ++r) {
    BatchSampler s = sampler(11, r, replicas);
    ASSERT_EQ(s.windows_per_epoch(), 25u / 3);
    for (std::uint64_t w : draw(s, static_cast<std::int64_t>(s.windows_per_epoch()))) {
      EXPECT_TRUE(seen.insert(w).second) << "window " << w << " given to two replicas";
    }
    EXPECT_EQ(s.state().epoch, 1u);
  }
  EXPECT_EQ(seen.size(), 24u);
}

TEST_F(DataSampler, RestoreContinuesTheStreamAcrossAnEpochBoundary) {
  BatchSampler uninterrupted = sampler(5, 1, 2);
  std::vector<std::uint64_t> expected = draw(uninterrupted, 40);  // 12 windows per epoch

  BatchSampler first = sampler(5, 1, 2);
  std::vector<std::uint64_t> got = draw(first, 10);
  SamplerState saved = SamplerState::from_json(nlohmann::json::parse(first.state().to_json().dump()));
  EXPECT_EQ(saved.epoch, 0u);
  EXPECT_EQ(saved.cursor, 10u);
  BatchSampler resumed = sampler(5, 1, 2);
  resumed.restore(saved);
  for (std::uint64_t w : draw(resumed, 30)) got.push_back(w);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(resumed.state().epoch, 3u);
  EXPECT_EQ(resumed.state().cursor, 4u);
}

TEST_F(DataSampler, RestoreInALaterEpoch) {
  BatchSampler uninterrupted = sampler(5);
  draw(uninterrupted, 30);
  SamplerState saved = uninterrupted.state();
  EXPECT_EQ(saved.epoch, 1u);
  std::vector<std::uint64_t> expected = draw(uninterrupted, 30);
  BatchSampler resumed = sampler(5);
  resumed.restore(saved);
  EXPECT_EQ(draw(resumed, 30), expected);
}

TEST_F(DataSampler, WithoutShuffleWindowsComeInOrder) {
  BatchSampler single = sampler(5, 0, 1, false);
  std::vector<std::uint64_t> expected(25);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(draw(single, 25), expected);
  EXPECT_EQ(draw(single, 2), (std::vector<std::uint64_t>{0, 1})) << "and start over";

  BatchSampler second_of_two = sampler(5, 1, 2, false);
  EXPECT_EQ(draw(second_of_two, 4), (std::vector<std::uint64_t>{1, 3, 5, 7}));
}

TEST_F(DataSampler, TooLittleDataIsADataError) {
  try {
    BatchSampler(*data_, 60, 1, 0, 2, true);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("103 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("61 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("2 replica"), std::string::npos) << message;
    EXPECT_NE(message.find("shorter data.seq_len"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(BatchSampler(*data_, 51, 1, 0, 2, true));
}

TEST_F(DataSampler, RestoreBeyondTheEpochIsADataError) {
  BatchSampler s = sampler(1);
  EXPECT_THROW(s.restore(SamplerState{0, 25}), DataError);
}

TEST(DataSamplerState, MalformedJsonIsADataError) {
  EXPECT_THROW(SamplerState::from_json(nlohmann::json{{"epoch", 1}}), DataError);
  EXPECT_THROW(SamplerState::from_json(nlohmann::json{{"epoch", -1}, {"cursor", 0}}), DataError);
  EXPECT_THROW(SamplerState::from_json(nlohmann::json::array()), DataError);
  EXPECT_THROW(SamplerState::from_json(nlohmann::json{{"epoch", 1}, {"cursor", 0}, {"order", "sorted"}}), DataError);
  EXPECT_THROW(SamplerState::from_json(nlohmann::json{{"epoch", 1}, {"cursor", 0}, {"order", 1}}), DataError);
}

// An epoch's order is the keyed permutation of all W windows (note "keyed-order"), and a checkpoint says so.
TEST_F(DataSampler, AnEpochIsTheKeyedPermutationOfItsWindows) {
  BatchSampler two_epochs = sampler(5);
  const std::vector<std::uint64_t> got = draw(two_epochs, 50);
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    const KeyedPermutation order(25, mix_seed(5, epoch));
    for (std::uint64_t i = 0; i < 25; ++i) EXPECT_EQ(got[epoch * 25 + i], order(i)) << "epoch " << epoch << ", " << i;
  }
  EXPECT_EQ(two_epochs.state().to_json(), (nlohmann::json{{"epoch", 2}, {"cursor", 0}, {"order", "keyed"}}));
}

// A checkpoint written before the keyed order has no "order": it resumes in the stored Fisher-Yates order it
// was trained in, this epoch and every later one, and keeps saying so in the checkpoints it writes next.
TEST_F(DataSampler, ACheckpointFromBeforeTheKeyedOrderResumesInItsOwnOrder) {
  BatchSampler resumed = sampler(5, 1, 2);
  resumed.restore(SamplerState::from_json(nlohmann::json::parse(R"({"epoch": 1, "cursor": 3})")));
  const std::vector<std::uint64_t> got = draw(resumed, 9 + 12);  // the rest of epoch 1 (12 per epoch), then epoch 2
  std::vector<std::uint64_t> expected;
  for (std::uint64_t epoch = 1; epoch <= 2; ++epoch) {
    std::mt19937_64 rng(mix_seed(5, epoch));
    const auto order = random_permutation(25, rng);
    for (std::uint64_t cursor = epoch == 1 ? 3 : 0; cursor < 12; ++cursor) expected.push_back(order[1 + 2 * cursor]);
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(resumed.state().to_json(), (nlohmann::json{{"epoch", 3}, {"cursor", 0}, {"order", "stored"}}));
  // A keyed checkpoint restored into that sampler switches it back.
  resumed.restore(SamplerState::from_json(nlohmann::json::parse(R"({"epoch": 0, "cursor": 0, "order": "keyed"})")));
  BatchSampler fresh = sampler(5, 1, 2);
  EXPECT_EQ(draw(resumed, 12), draw(fresh, 12));
}

// The shuffle must not change between versions or platforms: resumed runs and document splits
// depend on it. These values are pinned.
TEST(DataShuffle, PermutationIsPinned) {
  std::mt19937_64 rng(1234);
  EXPECT_EQ(random_permutation(10, rng), (std::vector<std::uint64_t>{0, 3, 4, 7, 9, 8, 5, 6, 1, 2}));
  EXPECT_EQ(mix_seed(1234, 0), 11391823781456656621ull);
}

TEST(DataShuffle, UniformBelowStaysInRange) {
  std::mt19937_64 rng(1);
  std::vector<int> counts(3);
  for (int i = 0; i < 3000; ++i) ++counts[uniform_below(rng, 3)];
  for (int c : counts) EXPECT_GT(c, 900);
  EXPECT_EQ(uniform_below(rng, 1), 0u);
}

}  // namespace
}  // namespace loco::data
