// Note "emulated-wall-clock" (train/emulated_clock.h) as a strategy meets it: a replica's exchanges
// use its emulated link one after another. An exchange that starts when the link is free of the earlier
// ones occupies it for the link time the group charged it; waiting for it moves the replica's clock to
// when the link is free again. Compute that runs meanwhile (DDP buckets during backward, Streaming
// DiLoCo's τ inner steps) hides the link time; what is not hidden shows as a wait.
#pragma once

#include <functional>

#include "loco/comm/group.h"
#include "loco/train/emulated_clock.h"

namespace loco {

class LinkTimeline {
 public:
  explicit LinkTimeline(EmulatedClock& clock) : clock_(clock) {}

  // Runs `exchange` and returns the link time the group charged for it. The caller must be the
  // group's only user meanwhile.
  static double charged_seconds(comm::Group& group, const std::function<void()>& exchange);

  // When an exchange issued now starts on the link: after the ones before it.
  double start_time() const;
  // Records that an exchange started at `start` holds the link for `seconds`.
  void occupy(double start, double seconds) { free_at_ = start + seconds; }
  // Runs `exchange` (`group`'s only user meanwhile) and queues its link time after the exchanges
  // before it; does not wait for it.
  void queue(comm::Group& group, const std::function<void()>& exchange);
  // Waits (on the emulated clock) until the link has carried everything queued.
  void wait() { clock_.wait_until(free_at_); }
  // A blocking exchange: queue, then wait.
  void exchange_and_wait(comm::Group& group, const std::function<void()>& exchange);

  // For checkpoints: when the link is free.
  double free_at() const { return free_at_; }
  void restore(double free_at) { free_at_ = free_at; }

 private:
  EmulatedClock& clock_;
  double free_at_ = 0;
};

}  // namespace loco
