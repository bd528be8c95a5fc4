// Elapsed wall time in seconds on the steady clock, for logs, metrics and durations of events.
#pragma once

#include <chrono>

namespace loco {

using SteadyClock = std::chrono::steady_clock;

// The longest wait loco accepts in seconds (comm.timeout_s, launch --grace-s, bench --timeout-s): 11.6 days,
// longer than any peer is worth waiting for. From about 9.3e9 s a deadline of now + wait overflowed the
// steady clock's nanoseconds, and the wait ended at once.
inline constexpr double kLongestWaitSeconds = 1e6;

inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace loco
