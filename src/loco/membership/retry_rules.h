// How a member retries a synchronisation whose attempts fail (note "retry-pacing"). The first retry goes at
// once: a member left, and the next quorum forms without it. Later ones wait, doubling from 0.1 s to at most
// 2 s, so that a failure that comes back at once (a store that answers garbage, a partner that refuses every
// connection) does not ask the coordinator for a quorum every 20 ms for as long as it lasts (measured before:
// 45 quorums a second for 150 s). Failures that go on for longer than a wait for a quorum may last
// (comm.timeout_s), ten of them at least, end the member's run as that wait does, naming the last failure. Pure
// logic, tested without a network; times are seconds on one steady clock.
#pragma once

#include <cstdint>
#include <string>

namespace loco::membership {

class RetryPacing {
 public:
  explicit RetryPacing(double give_up_after_s) : give_up_after_s_(give_up_after_s) {}

  // An attempt failed at `now_s`, `why` (kept for the message that gives up).
  void failed(double now_s, std::string why);
  // Seconds to wait before the next attempt.
  double pause_s() const;
  // Throws GaveUpWaiting (util/stop_requested.h), naming `step`, the failures and the last one, when attempts
  // have failed, ten times at least, for longer than give_up_after_s by `now_s` (counted from the first failure:
  // a long wait for the first quorum is not one).
  void give_up_if_exhausted(std::int64_t step, double now_s) const;

  int failures() const { return failures_; }

 private:
  double give_up_after_s_;
  int failures_ = 0;
  double first_failure_s_ = 0;
  std::string last_failure_;
};

}  // namespace loco::membership
