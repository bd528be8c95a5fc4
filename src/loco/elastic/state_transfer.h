// Sending a replica's encoded state (train/replica_state.h) from one member of a group to the others:
// its size and CRC-32 first, then the bytes, both as broadcasts (collectives, so that a broken quorum
// ends the wait: GroupOptions::abandoned). A receiver whose bytes do not match the CRC throws CommError
// naming the sender: nothing of them is applied, and the synchronisation fails and is retried.
#pragma once

#include <string>

#include "loco/comm/group.h"

namespace loco::elastic {

// `bytes` holds the payload on rank `root` and receives it on the others; `sender` names root in errors.
void broadcast_bytes(comm::Group& group, std::string& bytes, int root, const std::string& sender);

}  // namespace loco::elastic
