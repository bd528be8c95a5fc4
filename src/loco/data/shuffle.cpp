#include "loco/data/shuffle.h"

#include <numeric>
#include <utility>

#include "loco/util/error.h"

namespace loco::data {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  LOCO_CHECK(bound > 0, "uniform_below needs a positive bound");
  // Values below 2^64 mod bound are rejected so that the rest split into equally likely residues.
  const std::uint64_t reject_below = (0 - bound) % bound;
  std::uint64_t x = rng();
  while (x < reject_below) x = rng();
  return x % bound;
}

std::vector<std::uint64_t> random_permutation(std::uint64_t n, std::mt19937_64& rng) {
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  for (std::uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[uniform_below(rng, i)]);
  return order;
}

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) { return splitmix64(splitmix64(seed) ^ stream); }

}  // namespace loco::data
