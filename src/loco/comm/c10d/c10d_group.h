// Groups across processes and hosts through c10d (docs/design.md §3 "Group"): ProcessGroupGloo on CPU and
// ProcessGroupNCCL on CUDA (when built against a CUDA libtorch), rendezvous through c10d's TCPStore
// on rank 0. c10d moves the tensors; loco adds the interface, accounting and typed errors.
#pragma once

#include <memory>
#include <string>

#include "loco/comm/group.h"

namespace loco::comm {

struct C10dOptions {
  std::string backend = "gloo";  // "gloo" or "nccl"
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Who serves the store at master_addr:master_port: rank 0 (a static run), or someone else, such as the
  // coordinator of an elastic run (store_server.h), in which case every rank is a client.
  bool rank0_serves_store = true;
  // Prefix of this group's keys in the store: each quorum of an elastic run gets a fresh one, so groups of
  // different quorums (and coordinator incarnations) never read each other's keys. Empty: none.
  std::string store_prefix;
  // Network interface for Gloo's connections; empty: the one that routes to master_addr.
  std::string interface;
  // How long rendezvous (store connection and the ranks' handshake) may take.
  Timeout rendezvous_timeout{std::chrono::seconds(60)};
  int cuda_device = 0;  // NCCL: the GPU of this rank (usually LOCAL_RANK)
  GroupOptions group;
};

// Whether this build can create a group of the given backend ("gloo", "nccl").
bool c10d_backend_available(const std::string& backend);

// Connects to the other ranks. Throws CommError (port in use, bad address, unknown backend) or
// CommTimeout (the store or a rank could not be reached in time), each naming the fix.
std::unique_ptr<Group> make_c10d_group(const C10dOptions& options);

}  // namespace loco::comm
