// Every rank's bytes to every rank, paced (note "paced-exchange"): the all-gather phase of
// piecewise_reduce.h, and the whole of an exchange whose contributions do not add up on the way (the
// sparse contributions of SparseLoCo, algo/sparse_exchange.h). Ring all-gathers of spans of the ranks'
// equal-size buffers, up to `in_flight` of them started before the first is waited for (round_window.h).
// Wire bytes per rank: (N − 1) × its buffer, sent and received (link/traffic.h).
#pragma once

#include <cstdint>

#include "loco/comm/group.h"

namespace loco::comm {

struct GatherTimes {
  int rounds = 0;
  double wait_s = 0;  // waiting for the collectives
};

// `mine`: this rank's bytes (host uint8, the same size on every rank). Returns, on the host, every rank's
// in rank order, rank r's at r × mine.numel(). `span_bytes`: bytes of each rank's buffer per round (0: one
// round). Adds to `times`.
torch::Tensor paced_all_gather(Group& group, const torch::Tensor& mine, std::int64_t span_bytes, int in_flight,
                               Timeout timeout, GatherTimes& times);

}  // namespace loco::comm
