#include "loco/data/shuffle.h"

#include <numeric>
#include <utility>

namespace loco::data {

std::vector<std::uint64_t> random_permutation(std::uint64_t n, std::mt19937_64& rng) {
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  for (std::uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[uniform_below(rng, i)]);
  return order;
}

}  // namespace loco::data
