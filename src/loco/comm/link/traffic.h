// What one operation puts on one rank's link (note "traffic-model"). Both backends count the
// messages of the algorithm they run, not TCP/IP headers, so that LocalGroup and C10dGroup report
// the same bytes for the same call:
//   ring all-reduce       2·(N−1)/N·B sent and received, 2·(N−1) rounds
//   ring all-gather       (N−1)·B sent and received,      N−1 rounds
//   all-to-all            the pieces addressed to (from) other ranks, 1 round
//   binomial broadcast    B received (except the root), B per child sent, ⌈log2 N⌉ rounds
//   send / recv           B, 1 round
//   barrier               no payload, ⌈log2 N⌉ rounds
// B is the rank's tensor in bytes. A round is a step that waits for the previous one, so it pays the
// link latency once.
#pragma once

#include <cstdint>
#include <vector>

namespace loco::comm {

struct Traffic {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_recv = 0;
  int rounds = 0;
};

Traffic ring_all_reduce_traffic(std::uint64_t bytes, int world_size);
Traffic ring_all_gather_traffic(std::uint64_t bytes_per_rank, int world_size);
// split_bytes[r]: bytes this rank sends to (receives from) rank r; its own piece stays local.
Traffic all_to_all_traffic(const std::vector<std::uint64_t>& send_split_bytes,
                           const std::vector<std::uint64_t>& recv_split_bytes, int rank);
Traffic binomial_broadcast_traffic(std::uint64_t bytes, int rank, int root, int world_size);
Traffic point_to_point_traffic(std::uint64_t bytes_sent, std::uint64_t bytes_recv);
Traffic barrier_traffic(int world_size);

}  // namespace loco::comm
