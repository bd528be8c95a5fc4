#include "loco/algo/make_strategy.h"

#include <fmt/format.h>

#include "loco/algo/ddp.h"
#include "loco/algo/diloco.h"
#include "loco/algo/noloco.h"
#include "loco/config/algorithms.h"
#include "loco/util/error.h"

namespace loco {

namespace {

OuterStepSettings diloco_settings(const DilocoConfig& c) {
  OuterStepSettings s;
  s.name = "diloco";
  s.outer_lr = c.outer_lr;
  s.outer_momentum = c.outer_momentum;
  s.weighted = c.weighted;
  s.drop_rate = c.drop_rate;
  return s;
}

OuterStepSettings streaming_settings(const RunConfig& config) {
  const StreamingConfig& c = config.streaming;
  OuterStepSettings s;
  s.name = "streaming";
  s.outer_lr = c.outer_lr;
  s.outer_momentum = c.outer_momentum;
  s.streaming = true;
  s.fragments = c.fragments;
  s.strided = c.assignment == "strided";
  s.embeddings_fragment = c.embeddings_fragment;
  s.overlap = c.overlap;
  s.overlap_auto = c.overlap_auto;
  s.mix = c.mix;
  s.simulated_replicas = config.dist.backend == "local";
  return s;
}

// SparseLoCo: DiLoCo's outer step with μ = 0, fed the sparse exchange (algo/sparse_exchange.h).
OuterStepSettings sparseloco_settings(const SparselocoConfig& c) {
  OuterStepSettings s;
  s.name = "sparseloco";
  s.outer_lr = c.outer_lr;
  s.outer_momentum = 0;
  s.sparse = SparseSettings{c.beta, static_cast<std::size_t>(c.topk), static_cast<int>(c.bits),
                            c.average == "contributors"};
  return s;
}

}  // namespace

std::unique_ptr<Strategy> make_strategy(const RunConfig& config, const ReplicaContext& context) {
  const Algorithm algorithm = algorithm_named(config.dist.algorithm);
  if (algorithm == Algorithm::none) return std::make_unique<SingleReplica>();
  if (context.membership == nullptr || context.clock == nullptr) {
    throw InternalError(fmt::format("dist.algorithm {} needs a membership and a clock", config.dist.algorithm));
  }
  const std::int64_t total = context.total_steps;
  switch (algorithm) {
    case Algorithm::none:
      break;
    case Algorithm::ddp:
      if (context.group == nullptr) throw InternalError("dist.algorithm ddp needs a group");
      return std::make_unique<DataParallel>(config.ddp, context);
    case Algorithm::diloco:
      return std::make_unique<Diloco>(diloco_settings(config.diloco), config.exchange(),
                                      SyncPoints(SyncSchedule(config.diloco.sync_every, total)), context);
    case Algorithm::localsgd:
      return std::make_unique<Diloco>(
          local_sgd_settings(), config.exchange(),
          SyncPoints(SyncSchedule(config.localsgd.sync_every, config.localsgd.qsr_alpha, config.optim, total)),
          context);
    case Algorithm::streaming: {
      const StreamingConfig& s = config.streaming;
      const auto fragments = static_cast<std::size_t>(s.fragments + (s.embeddings_fragment ? 1 : 0));
      return std::make_unique<Diloco>(streaming_settings(config), config.exchange(),
                                      SyncPoints(fragments, s.sync_every, total), context);
    }
    case Algorithm::noloco:
      return std::make_unique<Noloco>(config.noloco, context);
    case Algorithm::sparseloco:
      return std::make_unique<Diloco>(sparseloco_settings(config.sparseloco), config.exchange(),
                                      SyncPoints(SyncSchedule(config.sparseloco.sync_every, total)), context);
  }
  throw InternalError(fmt::format("dist.algorithm {} has no strategy", config.dist.algorithm));  // unreachable
}

}  // namespace loco
