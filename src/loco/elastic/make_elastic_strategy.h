// The strategy of an elastic member (docs/fault-tolerance.md): algo/'s strategy for dist.algorithm over the
// member's QuorumMembership (diloco, localsgd, streaming, noloco: the same classes as a static run's), or
// ElasticDdp for ddp, which keeps its own protocol (elastic_ddp.h says why).
#pragma once

#include <memory>

#include "loco/elastic/quorum_membership.h"
#include "loco/train/strategy.h"

namespace loco::elastic {

// `context.membership` is `membership`.
std::unique_ptr<Strategy> make_elastic_strategy(const RunConfig& config, const ReplicaContext& context,
                                                QuorumMembership& membership);

}  // namespace loco::elastic
