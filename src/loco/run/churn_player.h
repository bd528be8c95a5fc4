// One replica's part of a dist.churn schedule (config/churn_schedule.h), played from its member's step
// hook: the same schedule drives replicas as threads of one process (local_elastic_run.h) and ranks
// of `loco launch --elastic` (elastic_member_run.h). Built with cpp-httplib only (LOCO_HAVE_MEMBERSHIP).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loco/config/churn_schedule.h"
#include "loco/run/elastic_member_run.h"

namespace loco::run {

// When `spec` is a random schedule, prints what it drew in the explicit form (to edit or replay).
void say_what_was_drawn(const std::string& spec, const std::vector<ChurnEvent>& schedule);

class ChurnPlayer {
 public:
  // `events`: replica `replica`'s (churn_events_of); `leave` ends the replica's current life (it must not
  // return: it throws, or kills the process); `run_reached(T)`: whether some replica has reached step T
  // or the run is over (asked every 0.1 s during a stall-until).
  ChurnPlayer(int replica, std::vector<ChurnEvent> events, std::function<void()> leave,
              std::function<bool(std::int64_t)> run_reached);

  // Passes over the events of the replica's first `lives` lives, each ending with a leave: a process the
  // launcher started again continues the schedule where its predecessor left it.
  void skip_lives(int lives);
  // When the next event is a return (the replica has left): takes it and gives its step. Nullopt when the
  // replica has left and never returns, or has not left.
  std::optional<std::int64_t> take_return();
  // Whether the replica is gone (its last event was a leave).
  bool gone() const { return gone_; }

  // The member's step hook: takes the leaves and stalls due after `step` (a stall: no heartbeats and no
  // training, as a stopped process, for its seconds or until the run reaches its step).
  MemberStepHook hook();
  void say(const std::string& what) const;

 private:
  int replica_;
  std::vector<ChurnEvent> events_;
  std::function<void()> leave_;
  std::function<bool(std::int64_t)> run_reached_;
  std::size_t next_ = 0;  // the first event not taken yet
  bool gone_ = false;
};

}  // namespace loco::run
