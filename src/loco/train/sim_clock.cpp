#include "loco/train/sim_clock.h"

#include <ctime>

namespace loco {

SimClock::SimClock(std::function<double()> compute_seconds) : compute_seconds_(std::move(compute_seconds)) {
  offset_ = -compute_seconds_();
}

double SimClock::now() const { return offset_ + compute_seconds_(); }

void SimClock::wait_until(double t) {
  const double current = now();
  if (t > current) offset_ += t - current;
}

SimClock::Pause::Pause(SimClock& clock) : clock_(clock), started_(clock.compute_seconds_()) {}

SimClock::Pause::~Pause() { clock_.offset_ -= clock_.compute_seconds_() - started_; }

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace loco
