#include "loco/train/emulated_clock.h"

#include <chrono>
#include <ctime>

#include "loco/comm/group.h"

namespace loco {

EmulatedClock::EmulatedClock(std::function<double()> compute_seconds) : compute_seconds_(std::move(compute_seconds)) {
  offset_ = -compute_seconds_();
}

double EmulatedClock::now() const { return offset_ + compute_seconds_(); }

void EmulatedClock::wait_until(double t) {
  const double current = now();
  if (t > current) offset_ += t - current;
}

EmulatedClock::Pause::Pause(EmulatedClock& clock) : clock_(clock), started_(clock.compute_seconds_()) {}

EmulatedClock::Pause::~Pause() { clock_.offset_ -= clock_.compute_seconds_() - started_; }

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

std::function<double()> replica_compute_seconds(const comm::Group* group, bool single_cpu_thread,
                                                int local_replicas) {
  if (single_cpu_thread) return [local_replicas] { return process_cpu_seconds() / local_replicas; };
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  return [start, group] {
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    return wall - (group ? group->stats().blocked_s : 0.0);
  };
}

}  // namespace loco
