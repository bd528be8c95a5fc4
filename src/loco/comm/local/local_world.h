// The meeting point of the replicas of a LocalGroup (local_group.h): collectives rendezvous here by
// sequence number, and point-to-point messages wait in per-channel mailboxes.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace loco::comm {

class LocalWorld {
 public:
  using Clock = std::chrono::steady_clock;
  using Contribution = std::vector<torch::Tensor>;

  explicit LocalWorld(int size);

  // Rank `rank`'s part of collective number `sequence` (`operation` names it, with any argument
  // that must agree across ranks). Returns every rank's contribution, in rank order, once all have
  // arrived. Contributions are read by every rank, so callers hand over tensors nobody writes to.
  // Throws CommTimeout at the deadline, PeerLost if a missing rank left, InternalError if ranks
  // disagree on the operation.
  std::vector<Contribution> exchange(int rank, std::uint64_t sequence, const std::string& operation,
                                     Contribution contribution, Clock::time_point deadline);

  // Point to point: messages on a (source, destination, tag) channel arrive in the order sent;
  // each receive reserves the next ticket when it is started, and takes that message.
  void post(int source, int destination, int tag, torch::Tensor message);
  std::uint64_t reserve(int source, int destination, int tag);
  bool has_arrived(int source, int destination, int tag, std::uint64_t ticket);
  torch::Tensor take(int source, int destination, int tag, std::uint64_t ticket, Clock::time_point deadline);

  // The rank's replica stopped: peers waiting for it fail with PeerLost instead of timing out.
  void leave(int rank);

 private:
  struct Slot {
    std::string operation;
    std::vector<Contribution> contributions;
    std::vector<bool> arrived;
    int arrivals = 0;
    int departures = 0;
  };
  struct Channel {
    std::map<std::uint64_t, torch::Tensor> messages;
    std::uint64_t posted = 0;
    std::uint64_t reserved = 0;
  };
  using ChannelKey = std::tuple<int, int, int>;

  // Names the ranks that have not arrived; throws PeerLost if one of them has left.
  std::string missing_ranks(const Slot& slot, int rank, std::uint64_t sequence);

  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, Slot> slots_;
  std::map<ChannelKey, Channel> channels_;
  std::vector<bool> left_;
};

}  // namespace loco::comm
