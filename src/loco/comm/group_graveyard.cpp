#include "loco/comm/group_graveyard.h"

namespace loco::comm {

GroupGraveyard::GroupGraveyard() : thread_([this] { destroy_until_closed(); }) {}

GroupGraveyard::~GroupGraveyard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  buried_.notify_all();
  thread_.join();
}

void GroupGraveyard::bury(std::unique_ptr<Group> group) {
  if (!group) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    groups_.push_back(std::move(group));
  }
  buried_.notify_all();
}

std::size_t GroupGraveyard::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return groups_.size() + destroying_;
}

void GroupGraveyard::destroy_until_closed() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    buried_.wait(lock, [this] { return closing_ || !groups_.empty(); });
    if (groups_.empty()) return;  // closing, and nothing left
    std::unique_ptr<Group> group = std::move(groups_.front());
    groups_.pop_front();
    ++destroying_;
    lock.unlock();
    group.reset();  // may block until the group's own timeout
    lock.lock();
    --destroying_;
  }
}

}  // namespace loco::comm
