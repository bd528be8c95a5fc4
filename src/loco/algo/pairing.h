// NoLoCo's partner choice (docs/algorithm-reference.md §5): at outer step s every replica draws the same seeded
// permutation of the M replicas and pairs perm[k] with perm[k + ⌊M/2⌋]; with odd M the one left
// over, perm[M−1], joins perm[0]'s pair as a group of three. Portable (data/shuffle.h), so every
// rank of every machine computes the same groups without communicating.
#pragma once

#include <cstdint>
#include <vector>

namespace loco {

// Every group (ranks ascending inside each group) for outer step `outer_step`.
std::vector<std::vector<int>> replica_groups(std::uint64_t seed, std::int64_t outer_step, int replicas);

// The group that holds `rank`.
std::vector<int> group_of(const std::vector<std::vector<int>>& groups, int rank);

}  // namespace loco
