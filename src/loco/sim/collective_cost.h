// How long one collective takes on a link: the volume a worker pushes through its link divided by
// the bandwidth (the link is busy for that long), plus the link's latency once per collective
// (docs/algorithm-reference.md §3 and §9).
#pragma once

#include "loco/sim/scenario.h"

namespace loco::sim {

struct CollectiveTime {
  double busy_s = 0;     // the link carries this collective's bytes for this long
  double latency_s = 0;  // then the result arrives this much later; the link is free meanwhile
  double total_s() const { return busy_s + latency_s; }
};

// Ring all-reduce of `values` values of `bits` bits among `participants`: 2·n·b·(p−1)/p / W + ε.
// Nothing to exchange (zero time) with a single participant.
CollectiveTime ring_allreduce(double values, double bits, int participants, const Link& link);

// NoLoCo's pairwise exchange: a replica sends two vectors of n values to its partner and receives
// two (full duplex): 2·n·b / W + ε.
CollectiveTime pairwise_exchange(double values, double bits, const Link& link);

}  // namespace loco::sim
