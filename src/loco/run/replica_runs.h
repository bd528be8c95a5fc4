// How `loco train` runs the replicas of a static run (docs/algorithms.md "Replicas and backends"): as
// threads of this process connected by a LocalGroup (dist.backend = "local"), or as this process's one
// rank of a c10d group (gloo, nccl: started by loco launch, torchrun or srun). The replicas of an elastic
// run: elastic_member_run.h (one per process) and local_elastic_run.h (threads).
#pragma once

#include <functional>
#include <optional>

#include "loco/comm/c10d/rank_environment.h"
#include "loco/comm/group.h"
#include "loco/train/trainer.h"

namespace loco::run {

// comm.timeout_s as a group's timeout.
comm::Timeout comm_timeout(const CommConfig& comm);
// The group options of a run's comm section for `replicas` replicas (the emulated link, pacing, timeout);
// `stopping`: TrainOptions::stop_requested, which cuts the waits GroupOptions::stopping says.
comm::GroupOptions group_options(const CommConfig& comm, int replicas, std::function<int()> stopping);
// The group options of a pipeline replica's stages: comm.timeout_s, and pipeline.bandwidth_mbps /
// pipeline.latency_ms as an emulated link that is waited out (docs/pipeline.md).
comm::GroupOptions pipeline_group_options(const RunConfig& config, std::function<int()> stopping);

// dist.replicas replicas as threads (one, without a group, for dist.algorithm = "none"): replica 0's
// summary.
TrainSummary train_local_replicas(const TrainOptions& options);

// This process as rank RANK of WORLD_SIZE (note "replica-directories"): its summary (rank 0's is the run's to
// print). With dist.stages = S > 1 rank r is stage r mod S of replica r / S (docs/pipeline.md).
// ConfigError when WORLD_SIZE is not dist.replicas · dist.stages, or the ranks would pace their exchanges
// in rounds of different sizes.
TrainSummary train_rank(TrainOptions options, const comm::RankEnvironment& environment);

}  // namespace loco::run
