// Joins the process to its run's group from the rank environment that `loco launch`, torchrun,
// Slurm or the netns script set (rank_environment.h).
#pragma once

#include <memory>
#include <string>

#include "loco/comm/group.h"
#include "loco/comm/c10d/rank_environment.h"

namespace loco::comm {

// backend: "gloo" or "nccl". Gloo binds to the interface named by LOCO_SOCKET_IFNAME (or
// GLOO_SOCKET_IFNAME, as PyTorch users know it), else to the address that routes to MASTER_ADDR.
// NCCL uses GPU LOCAL_RANK.
std::unique_ptr<Group> connect_from_environment(const RankEnvironment& environment, const std::string& backend,
                                                const GroupOptions& options, Timeout rendezvous_timeout);

}  // namespace loco::comm
