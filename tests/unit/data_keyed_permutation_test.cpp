// KeyedPermutation (data/keyed_permutation.h): a bijection for every size, pinned, and as well mixed as a
// random permutation by the statistics a data order needs (docs/data.md, "Quality of the shuffle").
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "loco/data/keyed_permutation.h"
#include "loco/util/error.h"

namespace loco::data {
namespace {

std::vector<std::uint64_t> order_of(std::uint64_t n, std::uint64_t key) {
  const KeyedPermutation permutation(n, key);
  std::vector<std::uint64_t> order(n);
  for (std::uint64_t i = 0; i < n; ++i) order[i] = permutation(i);
  return order;
}

bool is_permutation_of_range(std::vector<std::uint64_t> order) {
  std::vector<bool> seen(order.size(), false);
  for (const std::uint64_t x : order) {
    if (x >= order.size() || seen[x]) return false;
    seen[x] = true;
  }
  return true;
}

TEST(KeyedPermutation, IsABijectionForEverySize) {
  for (std::uint64_t n = 1; n <= 300; ++n) {
    for (const std::uint64_t key : {0ULL, 1ULL, 0x9e3779b97f4a7c15ULL}) {
      ASSERT_TRUE(is_permutation_of_range(order_of(n, key))) << "n = " << n << ", key " << key;
    }
  }
  // Just above and below powers of four (the Feistel domain grows by 4x there), and a million windows.
  for (const std::uint64_t n : {1023ULL, 1024ULL, 1025ULL, 4097ULL, 1'000'003ULL}) {
    EXPECT_TRUE(is_permutation_of_range(order_of(n, 7))) << "n = " << n;
  }
  EXPECT_THROW(KeyedPermutation(10, 1)(10), InternalError);
}

// The order of a run's data must not change between versions or platforms: resumed runs depend on it.
// The values come from a separate Python transcription of docs/data.md's description (SplitMix64 rounds,
// six of them, cycle walking), so the pin also checks the code against its description.
TEST(KeyedPermutation, IsPinned) {
  EXPECT_EQ(order_of(10, 1234), (std::vector<std::uint64_t>{1, 0, 3, 5, 9, 6, 2, 8, 4, 7}));
  const KeyedPermutation huge(std::uint64_t{1} << 40, 99);  // a trillion windows, nothing stored
  EXPECT_EQ(huge(0), 558545635516ULL);
  EXPECT_EQ(huge((std::uint64_t{1} << 40) - 1), 184630490799ULL);
  EXPECT_EQ(huge(12345), 290119278545ULL);
}

// Over many keys, the value at each position is uniform: a chi-square test of (position bin, value bin)
// counts, 10 x 10 bins, 2,000 keys of n = 100 (200,000 draws, 2,000 expected per cell). With 81 degrees
// of freedom the statistic exceeds 124 with probability 0.001 for a truly random permutation; the
// identity, or a rotation, gives about 1.8 million.
TEST(KeyedPermutation, EveryPositionTakesEveryValueAlike) {
  constexpr std::uint64_t n = 100, keys = 2000;
  std::vector<double> counts(100, 0.0);
  for (std::uint64_t key = 0; key < keys; ++key) {
    const auto order = order_of(n, key);
    for (std::uint64_t i = 0; i < n; ++i) counts[(i / 10) * 10 + order[i] / 10] += 1;
  }
  double chi_square = 0;
  const double expected = static_cast<double>(n * keys) / 100;
  for (const double c : counts) chi_square += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi_square, 124.0);
}

// Pearson correlation of two sequences.
double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// Neighbouring positions take unrelated values, and a value's position is unrelated to the value: both
// correlations average to zero over keys (for a random permutation of n = 1,000 each has a standard
// deviation of about 1/sqrt(n), so their mean over 200 keys about 0.002; the bound is 5 of those).
TEST(KeyedPermutation, NeighboursAndPositionsAreUncorrelated) {
  constexpr std::uint64_t n = 1000, keys = 200;
  double neighbours = 0, displacement = 0;
  for (std::uint64_t key = 0; key < keys; ++key) {
    const auto order = order_of(n, key);
    std::vector<double> here(order.begin(), order.end() - 1), next(order.begin() + 1, order.end());
    neighbours += correlation(here, next) / keys;
    std::vector<double> position(n), value(order.begin(), order.end());
    std::iota(position.begin(), position.end(), 0.0);
    displacement += correlation(position, value) / keys;
  }
  EXPECT_LT(std::abs(neighbours), 0.011);
  EXPECT_LT(std::abs(displacement), 0.011);
}

TEST(KeyedPermutation, OtherKeysGiveOtherOrders) {
  const auto first = order_of(1000, 1);
  int same_as_first = 0;
  for (std::uint64_t key = 2; key < 50; ++key) same_as_first += order_of(1000, key) == first ? 1 : 0;
  EXPECT_EQ(same_as_first, 0);
}

}  // namespace
}  // namespace loco::data
