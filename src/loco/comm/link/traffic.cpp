#include "loco/comm/link/traffic.h"

namespace loco::comm {

namespace {

int ceil_log2(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

}  // namespace

Traffic ring_all_reduce_traffic(std::uint64_t bytes, int world_size) {
  if (world_size <= 1) return {};
  const auto n = static_cast<std::uint64_t>(world_size);
  const std::uint64_t moved = 2 * (n - 1) * bytes / n;  // reduce-scatter then all-gather of B/N chunks
  return {moved, moved, 2 * (world_size - 1)};
}

Traffic ring_all_gather_traffic(std::uint64_t bytes_per_rank, int world_size) {
  if (world_size <= 1) return {};
  const std::uint64_t moved = static_cast<std::uint64_t>(world_size - 1) * bytes_per_rank;
  return {moved, moved, world_size - 1};
}

Traffic all_to_all_traffic(const std::vector<std::uint64_t>& send_split_bytes,
                           const std::vector<std::uint64_t>& recv_split_bytes, int rank) {
  Traffic traffic;
  for (std::size_t peer = 0; peer < send_split_bytes.size(); ++peer) {
    if (static_cast<int>(peer) == rank) continue;
    traffic.bytes_sent += send_split_bytes[peer];
    traffic.bytes_recv += recv_split_bytes[peer];
  }
  traffic.rounds = send_split_bytes.size() > 1 ? 1 : 0;
  return traffic;
}

Traffic binomial_broadcast_traffic(std::uint64_t bytes, int rank, int root, int world_size) {
  if (world_size <= 1) return {};
  // Rank v (relative to the root) receives once from v − 2^k (2^k its highest bit) and sends to
  // v + 2^j for every 2^j above its highest bit, while that rank exists.
  const int relative = (rank - root + world_size) % world_size;
  int first_child_bit = 1;
  while (first_child_bit <= relative) first_child_bit <<= 1;
  std::uint64_t children = 0;
  for (int bit = first_child_bit; relative + bit < world_size; bit <<= 1) ++children;
  return {children * bytes, relative == 0 ? 0 : bytes, ceil_log2(world_size)};
}

Traffic point_to_point_traffic(std::uint64_t bytes_sent, std::uint64_t bytes_recv) {
  return {bytes_sent, bytes_recv, 1};
}

Traffic barrier_traffic(int world_size) { return {0, 0, ceil_log2(world_size)}; }

}  // namespace loco::comm
