#include "loco/comm/local/local_world.h"

#include <fmt/format.h>

#include "loco/comm/comm_error.h"
#include "loco/util/error.h"

namespace loco::comm {

LocalWorld::LocalWorld(int size) : size_(size), left_(static_cast<std::size_t>(size), false) {}

std::string LocalWorld::missing_ranks(const Slot& slot, int rank, std::uint64_t sequence) {
  std::string missing;
  for (int peer = 0; peer < size_; ++peer) {
    if (slot.arrived[static_cast<std::size_t>(peer)]) continue;
    if (left_[static_cast<std::size_t>(peer)]) {
      throw PeerLost(fmt::format("rank {} left the group while rank {} waited for it in {} (operation #{}).", peer,
                                 rank, slot.operation, sequence));
    }
    missing += fmt::format("{}{}", missing.empty() ? "" : ", ", peer);
  }
  return missing;
}

std::vector<LocalWorld::Contribution> LocalWorld::exchange(int rank, std::uint64_t sequence,
                                                           const std::string& operation, Contribution contribution,
                                                           Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (left_[static_cast<std::size_t>(rank)]) {
    throw CommError(fmt::format("rank {}'s group was closed before {} (operation #{}).", rank, operation, sequence));
  }
  Slot& slot = slots_[sequence];
  if (slot.arrivals == 0) {
    slot.operation = operation;
    slot.contributions.resize(static_cast<std::size_t>(size_));
    slot.arrived.assign(static_cast<std::size_t>(size_), false);
  }
  LOCO_CHECK(slot.operation == operation, "collective mismatch at operation #{}: rank {} started {}, another rank {}",
             sequence, rank, operation, slot.operation);
  slot.contributions[static_cast<std::size_t>(rank)] = std::move(contribution);
  slot.arrived[static_cast<std::size_t>(rank)] = true;
  ++slot.arrivals;
  changed_.notify_all();

  while (slot.arrivals < size_) {
    if (left_[static_cast<std::size_t>(rank)]) {
      throw CommError(fmt::format("rank {}'s group was closed during {} (operation #{}).", rank, operation, sequence));
    }
    const std::string missing = missing_ranks(slot, rank, sequence);
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && slot.arrivals < size_) {
      throw CommTimeout(fmt::format(
          "rank {} timed out in {} (operation #{}) waiting for rank(s) {}: they are stalled, too slow, or did not "
          "start the same operation. Raise the timeout if they are only slow.",
          rank, operation, sequence, missing_ranks(slot, rank, sequence)));
    }
  }
  std::vector<Contribution> all = slot.contributions;
  if (++slot.departures == size_) slots_.erase(sequence);
  return all;
}

void LocalWorld::post(int source, int destination, int tag, torch::Tensor message) {
  std::lock_guard lock(mutex_);
  Channel& channel = channels_[{source, destination, tag}];
  channel.messages.emplace(channel.posted++, std::move(message));
  changed_.notify_all();
}

std::uint64_t LocalWorld::reserve(int source, int destination, int tag) {
  std::lock_guard lock(mutex_);
  return channels_[{source, destination, tag}].reserved++;
}

bool LocalWorld::has_arrived(int source, int destination, int tag, std::uint64_t ticket) {
  std::lock_guard lock(mutex_);
  const Channel& channel = channels_[{source, destination, tag}];
  return channel.messages.count(ticket) > 0;
}

torch::Tensor LocalWorld::take(int source, int destination, int tag, std::uint64_t ticket, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  Channel& channel = channels_[{source, destination, tag}];
  while (channel.messages.count(ticket) == 0) {
    if (left_[static_cast<std::size_t>(source)]) {
      throw PeerLost(fmt::format("rank {} left the group before sending the message rank {} waits for (tag {}).",
                                 source, destination, tag));
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && channel.messages.count(ticket) == 0) {
      throw CommTimeout(
          fmt::format("rank {} timed out waiting for a message from rank {} (tag {}).", destination, source, tag));
    }
  }
  auto node = channel.messages.extract(ticket);
  return node.mapped();
}

void LocalWorld::leave(int rank) {
  std::lock_guard lock(mutex_);
  left_[static_cast<std::size_t>(rank)] = true;
  changed_.notify_all();
}

}  // namespace loco::comm
