// The elastic strategy of a config's dist.algorithm (docs/fault-tolerance.md): ElasticDiloco for diloco,
// localsgd and streaming with overlap 0, ElasticNoloco for noloco, ElasticDdp for ddp; ConfigError for
// the others (none: the config refuses them first).
#pragma once

#include <memory>

#include "loco/elastic/quorum_group.h"
#include "loco/train/strategy.h"

namespace loco::elastic {

std::unique_ptr<Strategy> make_elastic_strategy(const RunConfig& config, const ReplicaContext& context,
                                                QuorumGroup& groups, membership::MemberClient& member);

}  // namespace loco::elastic
