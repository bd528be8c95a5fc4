// M replicas in one process (docs/design.md §3 "Group"): for experiments with simulated replicas and for
// tests. No sockets: ranks hand each other tensors through shared memory. Each replica runs in its
// own thread and uses its own Group; a Group is not shared between threads.
//
// Collectives combine contributions in rank order, so results are deterministic, and they are the
// same algorithms as over c10d where loco builds them (reduce-scatter, quantised all-reduce).
// Byte counts and emulated time are those of the algorithm a network backend would run (traffic.h).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "loco/comm/group.h"

namespace loco::comm {

// One group per rank, in rank order. Destroying a rank's group tells the others it has left: their
// pending and later operations that need it throw PeerLost.
std::vector<std::unique_ptr<Group>> make_local_groups(int world_size, const GroupOptions& options = {});

// Runs `body` once per rank, each on its own thread with its own group, and waits for all. A rank
// whose body throws leaves the group at once (the others get PeerLost rather than waiting out their
// timeouts); the first exception is rethrown here.
void run_local_replicas(int world_size, const std::function<void(Group&)>& body, const GroupOptions& options = {});

// `replicas` pipelines of `stages` stages (docs/pipeline.md "Ranks"), each stage a thread in two groups: its
// pipeline (the stages of its replica, ranked by stage, with `pipeline_options`) and its stage's group (that
// stage of every replica, ranked by replica, with `stage_options`). Runs body(pipeline, stage_group) on
// every thread and waits for all; a thread whose body throws leaves both its groups at once and the
// first exception is rethrown here, as in run_local_replicas.
void run_local_pipelines(int replicas, int stages, const std::function<void(Group& pipeline, Group& stage)>& body,
                         const GroupOptions& pipeline_options, const GroupOptions& stage_options);

}  // namespace loco::comm
