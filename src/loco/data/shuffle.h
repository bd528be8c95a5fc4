// Portable randomness for data order. std::shuffle and std::uniform_int_distribution are
// implementation-defined, so the same seed would give different document splits and batch orders on
// different standard libraries; everything here is derived from the raw output of std::mt19937_64,
// whose sequence the standard fixes.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace loco::data {

// A uniform integer in [0, bound), bound > 0, by rejection (no modulo bias).
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound);

// A uniformly random permutation of 0 .. n-1 (Fisher–Yates).
std::vector<std::uint64_t> random_permutation(std::uint64_t n, std::mt19937_64& rng);

// One engine seed per (seed, stream) pair, e.g. per epoch, with nearby pairs far apart (SplitMix64).
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream);

}  // namespace loco::data
