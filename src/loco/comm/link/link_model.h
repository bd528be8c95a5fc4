// The emulated network (docs/design.md §3 "Group"): turns the bytes and rounds of an operation into the
// seconds it would take on a given link, so that a run on loopback or in one process reports what it
// would cost on, say, 1 Gbit/s with 50 ms latency.
//
// Each rank has its own link (full duplex: sending and receiving do not slow each other). A
// collective finishes when its slowest participant does, so it is charged the lowest bandwidth and
// the highest latency of all ranks, applied to this rank's own bytes (ranks with different roles,
// like a broadcast's root and leaves, report different times); a message between two ranks is
// charged the worse of their two links:
//
//   seconds = rounds · latency + 8 · max(bytes sent, bytes received) / bandwidth
//
// Bandwidth 0 means unlimited; an all-zero model emulates nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loco/comm/link/traffic.h"

namespace loco::comm {

struct LinkSpec {
  double bandwidth_bps = 0;  // bits per second; 0 = unlimited
  double latency_s = 0;      // one way, per round
};

class LinkModel {
 public:
  LinkModel() = default;
  // One spec for every rank, or one per rank.
  explicit LinkModel(std::vector<LinkSpec> links);
  // From user input: comma-separated Mbit/s and ms, one value for all ranks or one per rank
  // ("100" or "100,100,10,100"). Empty strings mean unlimited / zero. Throws ConfigError.
  static LinkModel parse(const std::string& bandwidth_mbps, const std::string& latency_ms, int world_size);

  bool emulates_anything() const;
  double collective_seconds(const Traffic& traffic) const;
  double message_seconds(int rank_a, int rank_b, const Traffic& traffic) const;
  // Lowest bandwidth (bits/s, 0 = unlimited) and highest latency over all ranks.
  double slowest_bandwidth_bps() const;
  double highest_latency_s() const;
  std::string describe() const;  // e.g. "100 Mbit/s, 50 ms" or "rank 0: ..., rank 1: ..."

 private:
  const LinkSpec& link_of(int rank) const;
  static double seconds(const Traffic& traffic, double bandwidth_bps, double latency_s);

  std::vector<LinkSpec> links_;
};

}  // namespace loco::comm
