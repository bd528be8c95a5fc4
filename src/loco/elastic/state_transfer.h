// Sending a replica's encoded state (train/replica_state.h) from one member of a group to the others
// (docs/fault-tolerance.md "Healing"), as broadcasts (collectives, so that a broken quorum ends the wait:
// GroupOptions::abandoned):
//
//   header   size, chunk size, chunk count
//   digests  SHA-256 of the whole state, then of each chunk (taken by the sender before anything leaves)
//   chunk i  the bytes; every receiver checks them against digest i, and the group all-reduces a flag:
//            when any receiver's check failed, the sender sends chunk i again (up to `tries_per_chunk`
//            times in all), so a bad chunk costs one chunk, not the whole state
//   whole    the assembled bytes against the whole digest
//
// Every rank takes the same decisions from the same all-reduced flags, so the collectives stay aligned;
// when a chunk never arrives intact every rank throws CommError naming the sender and the chunk. A receiver
// fills its result only once everything was checked: nothing half-received is ever returned.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "loco/comm/group.h"

namespace loco::elastic {

struct StateTransferOptions {
  // 8 MiB: small enough that a resent chunk costs little on a slow link, large enough that the
  // all-reduced flag after each one (a round trip) is rare: 2 per GB.
  std::int64_t chunk_bytes = std::int64_t{8} << 20;
  int tries_per_chunk = 3;
  // Called on the sender with each chunk about to leave (index, its bytes: a copy) after its digest was
  // taken: fault injection (LOCO_FAULT=donating:...) and tests.
  std::function<void(std::int64_t chunk, torch::Tensor& outgoing)> before_sending;
};

// `bytes` holds the payload on rank `root` and receives it on the others; `sender` names root in logs and
// errors. Returns nothing on the sender; CommError as above, or when a collective fails.
void transfer_state(comm::Group& group, std::string& bytes, int root, const std::string& sender,
                    const StateTransferOptions& options = {});

}  // namespace loco::elastic
