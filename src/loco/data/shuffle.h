// Portable shuffles for data order (std::shuffle is implementation-defined): built on the raw output of
// std::mt19937_64 through util/portable_random.h.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "loco/util/portable_random.h"

namespace loco::data {

// A uniformly random permutation of 0 .. n-1 (Fisher–Yates).
std::vector<std::uint64_t> random_permutation(std::uint64_t n, std::mt19937_64& rng);

}  // namespace loco::data
