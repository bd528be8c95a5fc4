#include "loco/comm/group_graveyard.h"

namespace loco::comm {

void GroupGraveyard::bury(std::unique_ptr<Group> group) {
  if (!group) return;
  // std::function needs a copyable job; the worker drops it, and with it the group, on its own thread.
  destroyer_.submit([buried = std::shared_ptr<Group>(std::move(group))] {});
}

}  // namespace loco::comm
