#include "loco/algo/replica_hash.h"

#include <fmt/format.h>

#include <vector>

#include "loco/util/error.h"

namespace loco {

std::uint64_t tensor_hash(const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.contiguous().cpu();
  const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
  std::uint64_t h = 1469598103934665603ULL;
  for (std::int64_t i = 0, n = t.numel() * t.element_size(); i < n; ++i) {
    h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

void require_identical_across_replicas(comm::Group& group, const torch::Tensor& tensor, const std::string& what) {
  torch::Tensor mine = torch::full({1}, static_cast<std::int64_t>(tensor_hash(tensor)), torch::kInt64);
  torch::Tensor all = torch::empty({group.size()}, torch::kInt64);
  group.all_gather(mine, all);
  const auto* hashes = all.data_ptr<std::int64_t>();
  std::vector<int> differing;
  for (int r = 1; r < group.size(); ++r) {
    if (hashes[r] != hashes[0]) differing.push_back(r);
  }
  if (!differing.empty()) {
    throw InternalError(fmt::format("dist.check_sync: the {} of replicas {} differ from replica 0's; the replicas "
                                    "have diverged",
                                    what, fmt::join(differing, ", ")));
  }
}

}  // namespace loco
