#include "loco/algo/make_strategy.h"

#include <fmt/format.h>

#include "loco/algo/ddp.h"
#include "loco/algo/diloco.h"
#include "loco/algo/noloco.h"
#include "loco/algo/streaming_diloco.h"
#include "loco/util/error.h"

namespace loco {

std::unique_ptr<Strategy> make_strategy(const RunConfig& config, const ReplicaContext& context) {
  const std::string& algorithm = config.dist.algorithm;
  if (algorithm == "none") return std::make_unique<SingleReplica>();
  if (context.group == nullptr || context.clock == nullptr) {
    throw InternalError(fmt::format("dist.algorithm {} needs a group and a clock", algorithm));
  }
  const auto seed = static_cast<std::uint64_t>(config.train.seed);
  const std::int64_t total = context.total_steps;
  if (algorithm == "ddp") {
    return std::make_unique<DataParallel>(
        DdpSettings{config.ddp.bucket_mb, config.ddp.first_bucket_mb, config.ddp.overlap}, context);
  }
  if (algorithm == "diloco" || algorithm == "localsgd") {
    DilocoSettings s;
    s.name = algorithm;
    s.codec = config.comm.codec;
    s.block_size = config.comm.block_size;
    s.check_sync = config.dist.check_sync;
    s.seed = seed;
    s.tokens_per_step = config.replica_batch() * config.data.seq_len;
    if (algorithm == "localsgd") {
      // Local SGD is DiLoCo's outer step with η = 1, μ = 0: θ_g becomes the replicas' average.
      s.outer_lr = 1;
      s.outer_momentum = 0;
      return std::make_unique<Diloco>(
          s, SyncSchedule(config.localsgd.sync_every, config.localsgd.qsr_alpha, config.optim, total), context);
    }
    s.outer_lr = config.diloco.outer_lr;
    s.outer_momentum = config.diloco.outer_momentum;
    s.weighted = config.diloco.weighted;
    s.drop_rate = config.diloco.drop_rate;
    return std::make_unique<Diloco>(s, SyncSchedule(config.diloco.sync_every, total), context);
  }
  if (algorithm == "streaming") {
    const StreamingConfig& c = config.streaming;
    StreamingSettings s{c.sync_every, c.fragments,      c.assignment == "strided", c.embeddings_fragment,
                        c.overlap,    c.mix,            c.outer_lr,                c.outer_momentum,
                        c.codec,      config.comm.block_size, config.dist.check_sync};
    return std::make_unique<StreamingDiloco>(s, context);
  }
  if (algorithm == "noloco") {
    const NolocoConfig& c = config.noloco;
    return std::make_unique<Noloco>(NolocoSettings{c.momentum, c.beta, c.gamma, seed},
                                    SyncSchedule(c.sync_every, total), context);
  }
  throw ConfigError(fmt::format("dist.algorithm '{}' is unknown", algorithm));
}

}  // namespace loco
