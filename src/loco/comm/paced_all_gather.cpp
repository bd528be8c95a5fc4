#include "loco/comm/paced_all_gather.h"

#include <chrono>

#include "loco/comm/paced_rounds.h"
#include "loco/comm/round_window.h"
#include "loco/util/seconds_since.h"

namespace loco::comm {

void place_by_source(const torch::Tensor& whole, const torch::Tensor& part, std::int64_t stride, std::int64_t first,
                     std::int64_t bytes, int size) {
  const torch::Tensor host = part.to(torch::kCPU);
  for (int source = 0; source < size; ++source) {
    whole.narrow(0, source * stride + first, bytes).copy_(host.narrow(0, source * bytes, bytes));
  }
}

torch::Tensor paced_all_gather(Group& group, const torch::Tensor& mine, std::int64_t span_bytes, int in_flight,
                               Timeout timeout, GatherTimes& times) {
  const int size = group.size();
  const std::int64_t slot_bytes = mine.numel();
  const Rounds rounds(slot_bytes, span_bytes);
  const auto waited = [&](const WorkHandle& work) {
    const auto started = std::chrono::steady_clock::now();
    work->wait();
    times.wait_s += seconds_since(started);
    ++times.rounds;
  };
  if (rounds.count == 1) {  // the common case without a copy
    auto gathered = byte_buffer(slot_bytes * size).to(group.device());
    waited(group.all_gather_async(mine.to(group.device()), gathered, timeout));
    return gathered.to(torch::kCPU);
  }
  auto gathered = byte_buffer(slot_bytes * size);
  auto start = [&](std::int64_t round) {
    const std::int64_t first = rounds.start(slot_bytes, round), bytes = rounds.slice(slot_bytes, round);
    auto part = byte_buffer(bytes * size).to(group.device());
    auto sent = mine.narrow(0, first, bytes).to(group.device());
    auto work = group.all_gather_async(sent, part, timeout);
    return OpenRound{round, sent, part, work};
  };
  auto finish = [&](OpenRound& open) {
    waited(open.work);
    place_by_source(gathered, open.received, slot_bytes, rounds.start(slot_bytes, open.round),
                    rounds.slice(slot_bytes, open.round), size);
  };
  run_rounds(rounds.count, in_flight, start, finish);
  return gathered;
}

}  // namespace loco::comm
