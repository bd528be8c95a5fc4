// Runs the rounds of a paced exchange with up to `in_flight` of them started and not yet finished
// (link/round_size.h, "Rounds in flight"): while the first rounds' data crosses a link with latency, the
// next ones are already on the wire. Rounds start and finish in order, so every rank starts the same
// collectives in the same order whatever its window.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <type_traits>

namespace loco::comm {

// start(round) starts round `round` (0 ≤ round < count) and returns what finishing it needs; finish(that)
// waits for it and takes its results. A throw from either leaves the rounds still in flight unwaited:
// the group has failed and is abandoned by its caller.
template <typename Start, typename Finish>
void run_rounds(std::int64_t count, int in_flight, Start&& start, Finish&& finish) {
  using Open = std::invoke_result_t<Start&, std::int64_t>;
  const auto window = static_cast<std::size_t>(std::max(in_flight, 1));
  std::deque<Open> open;
  for (std::int64_t round = 0; round < count; ++round) {
    if (open.size() == window) {
      finish(open.front());
      open.pop_front();
    }
    open.push_back(start(round));
  }
  for (; !open.empty(); open.pop_front()) finish(open.front());
}

}  // namespace loco::comm
