#include "loco/algo/link_timeline.h"

#include <algorithm>

namespace loco {

double LinkTimeline::charged_seconds(comm::Group& group, const std::function<void()>& exchange) {
  const double before = group.stats().emulated_s;
  exchange();
  return group.stats().emulated_s - before;
}

double LinkTimeline::start_time() const { return std::max(clock_.now(), free_at_); }

// The start is read after the exchange call: compute it spent (encoding, a blocking collective's own
// work) comes before the link time, not under it.
void LinkTimeline::queue(comm::Group& group, const std::function<void()>& exchange) {
  const double seconds = charged_seconds(group, exchange);
  occupy(start_time(), seconds);
}

void LinkTimeline::exchange_and_wait(comm::Group& group, const std::function<void()>& exchange) {
  queue(group, exchange);
  wait();
}

}  // namespace loco
