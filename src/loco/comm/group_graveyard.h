// Note "group-graveyard": a group abandoned in the middle of an operation (a peer died or stopped) can
// block in its destructor until its queued work times out (~ProcessGroupGloo waits for its queue; measured
// on libtorch 1.13: 0.06-0.12 s after a kill, the whole group timeout after a SIGSTOP). An elastic run
// buries such groups here and goes on with the next quorum's group at once; a worker thread destroys
// them, one after another. Tensors an abandoned operation may still write into must not be parameters:
// reduce into scratch buffers and copy out only after a successful wait.
#pragma once

#include <memory>

#include "loco/comm/group.h"
#include "loco/util/serial_worker.h"

namespace loco::comm {

class GroupGraveyard {
 public:
  // Its destructor waits until every buried group is destroyed.
  void bury(std::unique_ptr<Group> group);
  // Groups buried and not yet destroyed.
  std::size_t pending() const { return destroyer_.pending(); }

 private:
  SerialWorker destroyer_;
};

}  // namespace loco::comm
