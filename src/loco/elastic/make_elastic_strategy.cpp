#include "loco/elastic/make_elastic_strategy.h"

#include "loco/algo/make_strategy.h"
#include "loco/config/algorithms.h"
#include "loco/elastic/elastic_ddp.h"

namespace loco::elastic {

std::unique_ptr<Strategy> make_elastic_strategy(const RunConfig& config, const ReplicaContext& context,
                                                QuorumMembership& membership) {
  if (algorithm_named(config.dist.algorithm) == Algorithm::ddp) {
    return std::make_unique<ElasticDdp>(context, membership, static_cast<std::uint64_t>(config.replica_batch()));
  }
  return make_strategy(config, context);
}

}  // namespace loco::elastic
