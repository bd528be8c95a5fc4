// pipeline.partition = "measured" (docs/pipeline.md): the layers per stage from measured time instead of
// parameters. The embedding has as many parameters as a few decoder layers but costs almost no compute,
// and the head's matmul and loss cost more than their share: balancing parameters balances memory, and
// balancing time balances the step.
#pragma once

#include <torch/types.h>

#include <string>

#include "loco/comm/group.h"
#include "loco/config/run_config.h"

namespace loco::pipeline {

// Stage 0 of replica 0 times one micro-batch's forward and backward (train.micro_batch_size sequences of
// data.seq_len tokens, on `device`) through probes of the run's model shape: a decoder layer, the embedding
// before it, and the final norm, head and loss after it (three one-layer parts, never the whole model), the
// median of a few repeats after a warm-up. It broadcasts the three times to the other replicas' stage 0
// over `replicas` (this stage's group across the replicas; null: one replica) and each stage 0 to its
// pipeline; every stage splits the layers by them (balanced_partition): one split in the whole run, as
// "3,4,4,3" (twin stages must hold the same layers).
std::string measured_partition(const RunConfig& config, comm::Group& pipeline, comm::Group* replicas,
                               torch::Device device);

}  // namespace loco::pipeline
