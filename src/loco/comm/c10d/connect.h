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

// The groups of one rank of a run of pipeline replicas (docs/pipeline.md "Ranks"): WORLD_SIZE = R·S ranks,
// rank r is stage r mod S of replica r / S. `world` holds every rank (connect_from_environment: its rank 0
// serves the store the others meet at, so it lives as long as they do; the ranks check on it that they
// share the run's config before they meet in these groups); `pipeline` the S stages of this rank's replica,
// ranked by stage, with `pipeline_options`; `stage` this stage of the R replicas, ranked by replica, with
// `stage_options`. The two kinds meet under store prefixes of their own.
struct PipelineGroups {
  std::unique_ptr<Group> world, pipeline, stage;
};
PipelineGroups connect_pipeline_groups(std::unique_ptr<Group> world, const RankEnvironment& environment,
                                       const std::string& backend, int stages, const GroupOptions& pipeline_options,
                                       const GroupOptions& stage_options, Timeout rendezvous_timeout);

}  // namespace loco::comm
