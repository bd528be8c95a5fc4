// Note "group-graveyard": a group abandoned in the middle of an operation (a peer died or stopped) can
// block in its destructor until its queued work times out (~ProcessGroupGloo waits for its queue; measured
// on libtorch 1.13: 0.06-0.12 s after a kill, the whole group timeout after a SIGSTOP). An elastic run
// buries such groups here and goes on with the next quorum's group at once; a thread of the graveyard
// destroys them, one after another. Tensors an abandoned operation may still write into must not be
// parameters: reduce into scratch buffers and copy out only after a successful wait.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "loco/comm/group.h"

namespace loco::comm {

class GroupGraveyard {
 public:
  GroupGraveyard();
  // Waits until every buried group is destroyed.
  ~GroupGraveyard();
  GroupGraveyard(const GroupGraveyard&) = delete;
  GroupGraveyard& operator=(const GroupGraveyard&) = delete;

  void bury(std::unique_ptr<Group> group);
  // Groups buried and not yet destroyed.
  std::size_t pending() const;

 private:
  void destroy_until_closed();

  mutable std::mutex mutex_;
  std::condition_variable buried_;
  std::deque<std::unique_ptr<Group>> groups_;
  std::size_t destroying_ = 0;
  bool closing_ = false;
  std::thread thread_;
};

}  // namespace loco::comm
