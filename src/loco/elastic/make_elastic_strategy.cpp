#include "loco/elastic/make_elastic_strategy.h"

#include <fmt/format.h>

#include "loco/algo/diloco.h"
#include "loco/config/algorithms.h"
#include "loco/elastic/elastic_ddp.h"
#include "loco/elastic/elastic_diloco.h"
#include "loco/elastic/elastic_noloco.h"
#include "loco/util/error.h"

namespace loco::elastic {

std::unique_ptr<Strategy> make_elastic_strategy(const RunConfig& config, const ReplicaContext& context,
                                                QuorumGroup& groups, membership::MemberClient& member) {
  const auto windows_per_step = static_cast<std::uint64_t>(config.replica_batch());
  const double vote_timeout_s = config.comm.timeout_s;
  const FragmentLayout whole = [](Llama&, const FlatParameters& p) {
    return std::vector<ParameterFragment>{whole_model(p)};
  };
  switch (algorithm_named(config.dist.algorithm)) {
    case Algorithm::diloco:
      return std::make_unique<ElasticDiloco>("diloco", config.diloco, config.exchange(),
                                             SyncPoints(SyncSchedule(config.diloco.sync_every, context.total_steps)),
                                             whole, OuterOverlap{}, context, groups, member, windows_per_step,
                                             vote_timeout_s);
    case Algorithm::localsgd: {
      const SyncSchedule schedule(config.localsgd.sync_every, config.localsgd.qsr_alpha, config.optim,
                                  context.total_steps);
      return std::make_unique<ElasticDiloco>("localsgd", local_sgd_as_diloco(config.localsgd), config.exchange(),
                                             SyncPoints(schedule), whole, OuterOverlap{}, context, groups, member,
                                             windows_per_step, vote_timeout_s);
    }
    case Algorithm::streaming: {
      // Fragments in turn, each an outer step; the config keeps the overlap below their spacing (note
      // "elastic-overlap").
      const StreamingConfig s = config.streaming;
      DilocoConfig outer;
      outer.outer_lr = s.outer_lr;
      outer.outer_momentum = s.outer_momentum;
      const auto fragments = static_cast<std::size_t>(s.fragments + (s.embeddings_fragment ? 1 : 0));
      const FragmentLayout blocks = [s](Llama& model, const FlatParameters& p) {
        return block_fragments(p, static_cast<std::int64_t>(model->model->layers->size()), s.fragments,
                               s.assignment == "strided", s.embeddings_fragment);
      };
      return std::make_unique<ElasticDiloco>("streaming", outer, config.exchange(),
                                             SyncPoints(fragments, s.sync_every, context.total_steps), blocks,
                                             OuterOverlap{s.overlap, s.mix}, context, groups, member, windows_per_step,
                                             vote_timeout_s);
    }
    case Algorithm::noloco:
      return std::make_unique<ElasticNoloco>(config.noloco, SyncSchedule(config.noloco.sync_every, context.total_steps),
                                             context, groups, member, windows_per_step, vote_timeout_s);
    case Algorithm::ddp:
      return std::make_unique<ElasticDdp>(context, groups, member, windows_per_step, vote_timeout_s);
    default:
      throw ConfigError(fmt::format("dist.elastic = true works with dist.algorithm diloco, localsgd, streaming, "
                                    "noloco or ddp, not {}",
                                    config.dist.algorithm));
  }
}

}  // namespace loco::elastic
