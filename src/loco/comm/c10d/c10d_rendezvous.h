// Rendezvous for C10dGroup: the TCPStore on rank 0 that the ranks meet at, and the local address
// Gloo should use. Turns c10d's socket errors into messages that name the fix.
#pragma once

#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "loco/comm/c10d/c10d_group.h"

namespace loco::comm {

// StopRequested where a stop was asked for (GroupOptions::stopping) while this rank waited to `what`; never for a
// group that may be abandoned (an elastic quorum's).
void stop_if_asked(const C10dOptions& options, const std::string& what);

// Rank 0 serves the store on master_port (all interfaces); the others connect to master_addr (StopRequested
// when GroupOptions::stopping says so while rank 0's store is not up yet).
c10::intrusive_ptr<c10d::Store> connect_store(const C10dOptions& options);

// Claims this rank's key in the store for this process (note "rank-claim"); CommError naming the process that
// holds it already (two runs given one MASTER_PORT, or a rank started twice).
void claim_rank(c10d::Store& store, const C10dOptions& options);

// For groups that may be abandoned (GroupOptions::abandoned: elastic quorums) or stopped (GroupOptions::stopping:
// training): every rank announces itself in the store and waits, polling, until all ranks have, so that Gloo's
// own handshake, which cannot be interrupted, only ever meets live peers. PeerLost when `abandoned` says the
// group is given up meanwhile (a member of the quorum died before it came), StopRequested when a stop is
// asked for, CommTimeout after the rendezvous timeout.
void await_every_rank(c10d::Store& store, const C10dOptions& options);

// Ranks started with different WORLD_SIZEs meet at one store, and Gloo's handshake then fails with its own
// text ("enforce fail at …address.cc…"). So each rank leaves its world size in the store before the handshake
// (announce_world_size); require_same_world_size, before the handshake and again when it fails, reads what
// the others left so far (it never waits) and throws a CommError naming the ranks and their sizes; it
// returns when it finds no difference.
void announce_world_size(c10d::Store& store, const C10dOptions& options);
void require_same_world_size(c10d::Store& store, const C10dOptions& options);

// The local IP address whose route reaches `master_addr` (e.g. the veth inside a network namespace),
// so that Gloo listens where the other ranks can reach it. Throws CommError if it cannot be found.
std::string local_address_towards(const std::string& master_addr, int master_port);

}  // namespace loco::comm
