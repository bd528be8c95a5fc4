// Elapsed wall time in seconds on the steady clock, for logs, metrics and durations of events.
#pragma once

#include <chrono>

namespace loco {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace loco
