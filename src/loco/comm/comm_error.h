// Errors of the communication layer (docs/design.md §4, recoverable tier). They derive from loco::Error,
// so the CLI prints their message and exits 1. A group that threw PeerLost or CommTimeout is out of
// step (Gloo may still be inside the abandoned operation); a strategy that survives failures
// (membership, later) must build a new group without the missing replica rather than reuse it.
#pragma once

#include "loco/util/error.h"

namespace loco::comm {

// Rendezvous failed, a collective was misused, or the transport reported an error.
class CommError : public Error {
  using Error::Error;
};
// An operation did not complete within its timeout: a peer is stalled, too slow, or never called it.
class CommTimeout : public CommError {
  using CommError::CommError;
};
// A peer left the group (its process exited or its connection closed) during an operation.
class PeerLost : public CommError {
  using CommError::CommError;
};

}  // namespace loco::comm
