#include "loco/comm/member_exchange.h"

#include <algorithm>

#include "loco/comm/link/link_fit.h"
#include "loco/util/seconds_since.h"

namespace loco::comm {

std::vector<torch::Tensor> exchange_among(Group& group, const torch::Tensor& mine, const std::vector<int>& members,
                                          GroupWide group_wide) {
  const int me = group.rank();
  const torch::Tensor flat = mine.reshape({-1});
  std::vector<torch::Tensor> theirs(members.size());
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (members[k] != me) theirs[k] = torch::empty_like(flat);
  }
  const std::int64_t round_bytes = group.round_bytes_per_peer(static_cast<int>(members.size()));
  const std::int64_t step = round_bytes > 0 ? std::max<std::int64_t>(round_bytes / flat.element_size(), 1)
                                            : std::max<std::int64_t>(flat.numel(), 1);
  const auto started = SteadyClock::now();
  int rounds = 0;
  for (std::int64_t start = 0; start < std::max<std::int64_t>(flat.numel(), 1); start += step, ++rounds) {
    const std::int64_t count = std::min(step, flat.numel() - start);
    std::vector<WorkHandle> work;
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (members[k] == me) continue;
      work.push_back(group.send_async(flat.narrow(0, start, count), members[k]));
      work.push_back(group.recv_async(theirs[k].narrow(0, start, count), members[k]));
    }
    for (auto& w : work) w->wait();
  }
  // A test every rank answers alike: the size is the model's, the same on every rank.
  const auto bytes_per_member = static_cast<double>(flat.numel() * flat.element_size());
  if (group_wide == GroupWide::yes && group.measures_link() && bytes_per_member >= LinkFit::kMinSampleBytes) {
    const double others = static_cast<double>(members.size()) - 1;
    group.learn_link({{bytes_per_member * others, static_cast<double>(rounds), seconds_since(started)}});
  }
  return theirs;
}

}  // namespace loco::comm
