// The per-document split of `loco prepare` (which documents are held out for validation) and the tokenizer's
// sample (which documents a tokenizer is trained on, within its budget).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "loco/data/document_split.h"
#include "loco/data/tokenizer_sample.h"

namespace loco::data {
namespace {

TEST(DataDocumentSplit, EachDocumentIsHeldOutWithTheFractionFromItsPositionAlone) {
  const DocumentSplit split(0.1, 1234);
  int held_out = 0;
  for (std::uint32_t file = 0; file < 20; ++file) {
    for (std::uint64_t line = 1; line <= 1000; ++line) held_out += split.in_validation(split.hash(file, line));
  }
  // Binomial(20000, 0.1): mean 2000, sd 42; 5 sd either side.
  EXPECT_GT(held_out, 2000 - 212);
  EXPECT_LT(held_out, 2000 + 212);
  // Position alone: the same (file, line) always answers the same, another seed answers otherwise.
  const DocumentSplit other(0.1, 99);
  int same = 0;
  for (std::uint64_t line = 1; line <= 1000; ++line) {
    EXPECT_EQ(split.hash(3, line), DocumentSplit(0.1, 1234).hash(3, line));
    same += split.in_validation(split.hash(3, line)) == other.in_validation(other.hash(3, line));
  }
  EXPECT_LT(same, 950);  // two independent splits agree on ~82% of documents
  EXPECT_FALSE(DocumentSplit(0, 1).in_validation(0));
  EXPECT_NE(split.hash(0, 1), split.hash(1, 0));
}

// The tiny-corpus rule: the candidate is the train document of smallest hash so far, until a
// document is drawn for val; then every document is what its hash says.
TEST(DataDocumentSplit, TheFallbackFollowsTheSmallestHashUntilValIsSeen) {
  using Role = ValidationFallback::Role;
  ValidationFallback fallback(true);
  EXPECT_EQ(fallback.observe(50, false), Role::candidate);
  EXPECT_EQ(fallback.observe(70, false), Role::train);
  EXPECT_EQ(fallback.observe(20, false), Role::candidate);
  EXPECT_TRUE(fallback.undecided());
  EXPECT_EQ(fallback.observe(90, true), Role::validation);
  EXPECT_FALSE(fallback.undecided());
  EXPECT_FALSE(fallback.has_candidate());
  EXPECT_EQ(fallback.observe(1, false), Role::train);
  EXPECT_EQ(fallback.documents(), 5u);
  ValidationFallback no_val(false);
  EXPECT_EQ(no_val.observe(1, false), Role::train);
  EXPECT_FALSE(no_val.undecided());
}

TEST(DataTokenizerSample, IsTheLowestPriorityDocumentsThatFitTheBudget) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const std::uint64_t budget = 200 + rng() % 2000;
    TokenizerSample sample(budget, static_cast<std::uint64_t>(trial));
    std::map<std::uint64_t, std::size_t> offered;  // priority -> bytes
    for (std::uint64_t line = 1; line <= 300; ++line) {
      const std::uint64_t priority = sample.priority(0, line);
      const std::size_t bytes = 1 + rng() % 60;
      offered[priority] = std::min<std::size_t>(bytes, budget / TokenizerSample::kMaxShare);  // cut to an eighth
      if (sample.wants(priority)) sample.offer(priority, std::string(bytes, 'a'));
    }
    // Expected: the longest prefix of the priority order that fits the budget.
    std::uint64_t expected_bytes = 0;
    std::size_t expected_count = 0;
    for (const auto& [priority, bytes] : offered) {
      if (expected_bytes + bytes > budget) break;
      expected_bytes += bytes;
      ++expected_count;
    }
    EXPECT_EQ(sample.size(), expected_count) << "trial " << trial;
    EXPECT_EQ(sample.bytes(), expected_bytes) << "trial " << trial;
    EXPECT_LE(sample.bytes(), budget);
  }
}

TEST(DataTokenizerSample, ADocumentGivesAtMostAnEighthOfTheBudget) {
  TokenizerSample sample(800, 1);
  sample.offer(5, std::string(60, 'a') + "\n" + std::string(500, 'b'));  // cut at the newline
  sample.offer(6, std::string(500, 'c'));                                // no newline: cut at 100 bytes
  EXPECT_EQ(sample.take_texts(), (std::vector<std::string>{std::string(60, 'a'), std::string(100, 'c')}));
}

TEST(DataTokenizerSample, RemoveDropsOneDocumentAndTakeGivesPriorityOrder) {
  TokenizerSample sample(1000, 1);
  sample.offer(30, "c");
  sample.offer(10, "a");
  sample.offer(20, "bb");
  sample.remove(20);
  sample.remove(99);  // not in the sample: nothing happens
  EXPECT_EQ(sample.bytes(), 2u);
  EXPECT_EQ(sample.take_texts(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(sample.size(), 0u);
}

}  // namespace
}  // namespace loco::data
