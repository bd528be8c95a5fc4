// Portable randomness. std::uniform_int_distribution is implementation-defined, so the same seed would
// give different choices on different standard libraries; everything here is derived from the raw output
// of std::mt19937_64, whose sequence the standard fixes.
#pragma once

#include <cstdint>
#include <random>

namespace loco {

// A uniform integer in [0, bound), bound > 0, by rejection (no modulo bias).
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound);

// One engine seed per (seed, stream) pair, e.g. per epoch, with nearby pairs far apart (SplitMix64).
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream);

}  // namespace loco
