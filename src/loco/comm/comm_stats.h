// What a group counts of the communication it carried (Group::stats(); docs/design.md §3 "Metrics"), apart
// from the Group so that code which only reports the counts needs no libtorch.
#pragma once

#include <cstdint>

namespace loco::comm {

// What one rank has communicated so far.
struct CommStats {
  std::uint64_t bytes_sent = 0;  // payload and codec scales, as the algorithm sends them (traffic.h)
  std::uint64_t bytes_recv = 0;
  std::uint64_t operations = 0;
  double blocked_s = 0;   // wall time the training waited for communication: not hidden behind compute
  double emulated_s = 0;  // time the operations would take on the emulated link
  double background_s = 0;  // wall time a background thread spent in wait() (BackgroundWaits)
};

// The counts of two groups together (an elastic member's, over the groups of its quorums).
inline CommStats& operator+=(CommStats& a, const CommStats& b) {
  a.bytes_sent += b.bytes_sent;
  a.bytes_recv += b.bytes_recv;
  a.operations += b.operations;
  a.blocked_s += b.blocked_s;
  a.emulated_s += b.emulated_s;
  a.background_s += b.background_s;
  return a;
}

}  // namespace loco::comm
