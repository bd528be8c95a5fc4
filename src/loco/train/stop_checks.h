// Note "graceful-stop" (trainer_stops.cpp, Trainer::agreed_stop): the steps at which the replicas of a static run
// check together, with one small gather, whether any of them was signalled to stop. They must check at the
// same steps, so the rule reads only what every replica has alike.
#pragma once

#include <cstdint>

namespace loco {

class StopChecks {
 public:
  enum class Check {
    none,            // not at this step
    now,             // a step where the replicas meet anyway, or a quiet check step
    after_settling,  // a check step with exchanges in flight: wait for them first
  };

  // `every`: train.stop_check_every (0: only where the replicas meet). `first_step`: the step this process
  // starts from (the same on every replica: where they resumed).
  StopChecks(std::int64_t every, std::int64_t first_step) : every_(every), checked_at_(first_step) {}

  // After `step`: a replica alone, or replicas the strategy synchronised, check (they meet anyway, so the
  // gather holds nobody up); so do all every `every` steps, so that a stop waits for at most that many steps
  // rather than for a round of H inner steps, which can outlast a spot instance's notice. An exchange in the
  // background could meet the gather in another order on each replica, so such a check step is skipped,
  // unless the replicas have not checked for `every` steps (Streaming with τ at least its fragments' spacing
  // has one in flight at every step, and a stop never came): then they settle the exchanges first.
  Check at(std::int64_t step, bool alone, bool synchronised, bool exchanging) const {
    if (alone || synchronised) return Check::now;
    if (every_ <= 0 || step % every_ != 0) return Check::none;
    if (!exchanging) return Check::now;
    return step - checked_at_ >= every_ ? Check::after_settling : Check::none;
  }
  // The replicas checked after `step`.
  void checked(std::int64_t step) { checked_at_ = step; }

 private:
  std::int64_t every_;
  std::int64_t checked_at_;
};

}  // namespace loco
