#include "loco/comm/member_exchange.h"

#include <algorithm>

#include "loco/comm/link/link_fit.h"
#include "loco/comm/round_window.h"
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
  const Pacing pacing = group.pacing(static_cast<int>(members.size()));
  const std::int64_t round_bytes = pacing.round_bytes;
  const std::int64_t step = round_bytes > 0 ? std::max<std::int64_t>(round_bytes / flat.element_size(), 1)
                                            : std::max<std::int64_t>(flat.numel(), 1);
  const std::int64_t count = std::max<std::int64_t>(flat.numel(), 1);
  const std::int64_t rounds = (count + step - 1) / step;
  const int in_flight = pacing.in_flight;
  const auto started = SteadyClock::now();
  auto start = [&](std::int64_t round) {
    const std::int64_t first = round * step, values = std::min(step, flat.numel() - first);
    std::vector<WorkHandle> work;
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (members[k] == me) continue;
      work.push_back(group.send_async(flat.narrow(0, first, values), members[k]));
      work.push_back(group.recv_async(theirs[k].narrow(0, first, values), members[k]));
    }
    return work;
  };
  auto finish = [](std::vector<WorkHandle>& work) {
    for (auto& w : work) w->wait();
  };
  run_rounds(rounds, in_flight, start, finish);
  // A test every rank answers alike: the size is the model's, the same on every rank.
  const auto bytes_per_member = static_cast<double>(flat.numel() * flat.element_size());
  if (group_wide == GroupWide::yes && group.measures_link() && bytes_per_member >= LinkFit::kMinSampleBytes) {
    const double others = static_cast<double>(members.size()) - 1;
    group.learn_link({{bytes_per_member * others, LinkFit::waited_rounds(rounds, in_flight), seconds_since(started)}});
  }
  return theirs;
}

}  // namespace loco::comm
