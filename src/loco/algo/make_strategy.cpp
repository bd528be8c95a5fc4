#include "loco/algo/make_strategy.h"

#include <fmt/format.h>

#include "loco/algo/ddp.h"
#include "loco/algo/diloco.h"
#include "loco/algo/noloco.h"
#include "loco/algo/streaming_diloco.h"
#include "loco/config/algorithms.h"
#include "loco/util/error.h"

namespace loco {

std::unique_ptr<Strategy> make_strategy(const RunConfig& config, const ReplicaContext& context) {
  const Algorithm algorithm = algorithm_named(config.dist.algorithm);
  if (algorithm != Algorithm::none && (context.group == nullptr || context.clock == nullptr)) {
    throw InternalError(fmt::format("dist.algorithm {} needs a group and a clock", config.dist.algorithm));
  }
  const std::int64_t total = context.total_steps;
  switch (algorithm) {
    case Algorithm::none:
      return std::make_unique<SingleReplica>();
    case Algorithm::ddp:
      return std::make_unique<DataParallel>(config.ddp, context);
    case Algorithm::diloco:
      return std::make_unique<Diloco>(config.diloco, config.exchange(), SyncSchedule(config.diloco.sync_every, total),
                                      context);
    case Algorithm::localsgd:
      return Diloco::local_sgd(config.localsgd, config.optim, config.exchange(), context);
    case Algorithm::streaming:
      return std::make_unique<StreamingDiloco>(config.streaming, config.exchange(), context,
                                               /*simulated_replicas=*/config.dist.backend == "local");
    case Algorithm::noloco:
      return std::make_unique<Noloco>(config.noloco, SyncSchedule(config.noloco.sync_every, total), context);
  }
  throw InternalError(fmt::format("dist.algorithm {} has no strategy", config.dist.algorithm));  // unreachable
}

}  // namespace loco
