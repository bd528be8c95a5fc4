#include "loco/algo/pairing.h"

#include <algorithm>

#include "loco/data/shuffle.h"
#include "loco/util/error.h"

namespace loco {

std::vector<std::vector<int>> replica_groups(std::uint64_t seed, std::int64_t outer_step, int replicas) {
  LOCO_CHECK(replicas >= 1, "{} replicas", replicas);
  if (replicas == 1) return {{0}};
  std::mt19937_64 rng(mix_seed(seed, static_cast<std::uint64_t>(outer_step)));
  const auto perm = data::random_permutation(static_cast<std::uint64_t>(replicas), rng);
  const int half = replicas / 2;
  std::vector<std::vector<int>> groups;
  for (int k = 0; k < half; ++k) {
    groups.push_back({static_cast<int>(perm[static_cast<std::size_t>(k)]),
                      static_cast<int>(perm[static_cast<std::size_t>(k + half)])});
  }
  if (replicas % 2 == 1) groups.front().push_back(static_cast<int>(perm.back()));
  for (auto& g : groups) std::sort(g.begin(), g.end());
  return groups;
}

std::vector<int> group_of(const std::vector<std::vector<int>>& groups, int rank) {
  for (const auto& g : groups) {
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  }
  LOCO_CHECK(false, "rank {} is in no group", rank);
  return {};
}

}  // namespace loco
