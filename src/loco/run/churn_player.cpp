#include "loco/run/churn_player.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "loco/util/print_unchecked.h"

namespace loco::run {

void say_what_was_drawn(const std::string& spec, const std::vector<ChurnEvent>& schedule) {
  if (spec.find('@') == std::string::npos && !schedule.empty()) {
    loco::print_unchecked(stderr, "churn: {} drew {}\n", spec, format_churn_schedule(schedule));
  }
}

ChurnPlayer::ChurnPlayer(int replica, std::vector<ChurnEvent> events, std::function<void()> leave,
                         std::function<bool(std::int64_t)> run_reached)
    : replica_(replica), events_(std::move(events)), leave_(std::move(leave)), run_reached_(std::move(run_reached)) {}

void ChurnPlayer::say(const std::string& what) const {
  loco::print_unchecked(stderr, "churn: replica {} {}\n", replica_, what);
}

void ChurnPlayer::skip_lives(int lives) {
  for (int life = 0; life < lives && next_ < events_.size(); ++next_) {
    if (events_[next_].kind == ChurnEvent::Kind::leave) {
      ++life;
      gone_ = true;
    }
  }
}

std::optional<std::int64_t> ChurnPlayer::take_return() {
  if (!gone_ || next_ >= events_.size()) return std::nullopt;
  gone_ = false;
  return events_[next_++].step;  // a return: parse_churn_schedule checked the order
}

MemberStepHook ChurnPlayer::hook() {
  return [this](std::int64_t step, membership::MemberClient& member) {
    while (next_ < events_.size() && events_[next_].kind != ChurnEvent::Kind::rejoin && events_[next_].step <= step) {
      const ChurnEvent& e = events_[next_++];
      if (e.kind == ChurnEvent::Kind::leave) {
        say(fmt::format("leaves after step {}", step));
        gone_ = true;
        leave_();
        return;  // not reached: leave_ throws or ends the process
      }
      if (e.until_step > 0) {
        say(fmt::format("stalls after step {} until a replica reaches step {} (no heartbeats)", step, e.until_step));
        // Silent in slices renewed long before they run out, so heartbeats resume soon after the stall.
        while (!run_reached_(e.until_step)) {
          member.pause_heartbeats(0.5);
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      } else {
        say(fmt::format("stalls for {} s after step {} (no heartbeats)", e.seconds, step));
        member.pause_heartbeats(e.seconds);
        std::this_thread::sleep_for(std::chrono::duration<double>(e.seconds));
      }
      say("continues");
    }
  };
}

}  // namespace loco::run
