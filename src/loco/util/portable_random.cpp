#include "loco/util/portable_random.h"

#include "loco/util/error.h"

namespace loco {

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

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) { return splitmix64(splitmix64(seed) ^ stream); }

}  // namespace loco
