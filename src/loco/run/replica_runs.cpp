#include "loco/run/replica_runs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "loco/comm/c10d/connect.h"
#include "loco/comm/local/local_group.h"
#include "loco/config/algorithms.h"
#include "loco/config/load_config.h"
#include "loco/train/runtime.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"

namespace loco::run {

comm::Timeout comm_timeout(const CommConfig& comm) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(comm.timeout_s * 1000));
}

comm::GroupOptions group_options(const CommConfig& comm, int replicas, std::function<int()> stopping) {
  comm::GroupOptions options;
  options.stopping = std::move(stopping);
  options.timeout = comm_timeout(comm);
  options.link = comm::LinkModel::parse(comm.bandwidth_mbps, comm.latency_ms, replicas);
  options.delay = comm::parse_link_delay(comm.delay, "comm.delay");
  options.round_size = comm::RoundSize::parse(comm.round_kib, "comm.round_kib");
  return options;
}

comm::GroupOptions pipeline_group_options(const RunConfig& config, std::function<int()> stopping) {
  comm::GroupOptions options;
  options.stopping = std::move(stopping);
  options.timeout = comm_timeout(config.comm);
  options.link = comm::LinkModel::parse(config.pipeline.bandwidth_mbps, config.pipeline.latency_ms,
                                        static_cast<int>(config.dist.stages));
  // Activations are messages between neighbours, not exchanges the emulated clock models: their link time
  // is really waited out, so that the step time and the bubble show it.
  if (options.link.emulates_anything()) options.delay = comm::LinkDelay::full;
  return options;
}

namespace {

// dist.replicas pipelines of dist.stages stages, each stage a thread (docs/pipeline.md): replica 0's
// first stage's summary (its loss is the pipeline's, its evaluation the whole model's).
TrainSummary train_local_pipelines(const TrainOptions& options) {
  const RunConfig& config = options.config;
  const int replicas = static_cast<int>(config.dist.replicas);
  const int stages = static_cast<int>(config.dist.stages);
  limit_blas_threads(config.train.threads);  // note "blas-pool"
  TrainSummary summary;
  const bool connected = algorithm_named(config.dist.algorithm) != Algorithm::none;
  comm::run_local_pipelines(
      replicas, stages,
      [&](comm::Group& pipeline, comm::Group& stage) {
        TrainOptions mine = options;
        mine.pipeline = &pipeline;
        mine.group = connected ? &stage : nullptr;
        const TrainSummary s = Trainer(mine).run();
        if (pipeline.rank() == 0 && stage.rank() == 0) summary = s;
      },
      pipeline_group_options(config, options.stop_requested),
      group_options(config.comm, replicas, options.stop_requested));
  return summary;
}

}  // namespace

TrainSummary train_local_replicas(const TrainOptions& options) {
  loco::print_unchecked(stderr, "resolved config:\n{}\n", to_toml(options.config));
  if (options.config.dist.stages > 1) return train_local_pipelines(options);
  const int replicas = static_cast<int>(options.config.dist.replicas);
  if (algorithm_named(options.config.dist.algorithm) == Algorithm::none) return Trainer(options).run();
  if (replicas > 1) limit_blas_threads(options.config.train.threads);  // note "blas-pool"
  TrainSummary summary;
  comm::run_local_replicas(
      replicas,
      [&](comm::Group& group) {
        TrainOptions mine = options;
        mine.group = &group;
        const TrainSummary s = Trainer(mine).run();
        if (group.rank() == 0) summary = s;
      },
      group_options(options.config.comm, replicas, options.stop_requested));
  return summary;
}

namespace {

// Ranks of which only some were given --resume met at different collectives (the resumed ones agree on their
// checkpoint's step first) and waited there until comm.timeout_s, then named a stall, or a config key the resume
// had changed (its vocabulary): said at once, before the configs are compared.
void require_all_or_none_resumed(comm::Group& everyone, bool resumed) {
  const auto differing = everyone.ranks_differing_from_rank_0(std::int64_t{resumed});
  if (differing.empty()) return;
  const bool differs = std::find(differing.begin(), differing.end(), everyone.rank()) != differing.end();
  const bool rank0_resumed = differs ? !resumed : resumed;
  throw ConfigError(
      fmt::format("rank 0 {} but rank(s) {} {}: every rank of a run resumes it (loco train --resume "
                  "CHECKPOINT on each, or the same command under loco launch), or none does",
                  rank0_resumed ? "resumes a checkpoint" : "starts a new run", fmt::join(differing, ", "),
                  rank0_resumed ? "start a new run" : "resume a checkpoint"));
}

// Note "same-config": ranks started with different configs (other files on other hosts, a per-rank --set) would
// exchange tensors of other shapes (gloo aborts the process), wait for each other until comm.timeout_s, or
// train apart without a word (data parallel replicas with other seeds). So every key of the resolved config is
// rank 0's on every rank, but those that only say where this rank reads, writes or computes. This covers what
// must agree for the ranks to meet at the same moments: how exchanges are cut into rounds (note "paced-exchange":
// comm.round_kib, bandwidth_mbps, latency_ms) and when they check for a stop (note "graceful-stop").
void require_same_config(comm::Group& everyone, const RunConfig& config) {
  const nlohmann::json shared = shared_settings_json(config);
  if (everyone.ranks_differing_from_rank_0(std::string_view(shared.dump())).empty()) return;
  // Every rank has every key, in the same order. dist.stages first: where dist.replicas is not set it follows
  // from WORLD_SIZE / dist.stages, and would be named for a difference the user made in dist.stages.
  std::vector<std::pair<std::string, std::string>> keys = {{"dist", "stages"}};
  for (const auto& [section, values] : shared.items()) {
    for (const auto& [key, value] : values.items()) keys.emplace_back(section, key);
  }
  for (const auto& [section, key] : keys) {
    const std::string whole = shared.at(section).at(key).dump();
    const auto differing = everyone.ranks_differing_from_rank_0(std::string_view(whole));
    if (differing.empty()) continue;
    const std::string text = whole.substr(0, 200);  // compared whole, shown cut
    // Each rank knows its own value, not rank 0's (before: other ranks showed theirs as rank 0's).
    const int me = everyone.rank();
    const bool mine = std::find(differing.begin(), differing.end(), me) != differing.end();
    const std::string difference =
        me == 0
            ? fmt::format("rank 0 has {}.{} = {} but rank(s) {} do not", section, key, text, fmt::join(differing, ", "))
        : mine ? fmt::format("rank {} has {}.{} = {}, which rank 0 does not", me, section, key, text)
               : fmt::format("rank(s) {} have another {}.{} than rank 0", fmt::join(differing, ", "), section, key);
    throw ConfigError(
        fmt::format("{}: the ranks of a run must share its config (the same file and --set on every "
                    "host)",
                    difference));
  }
  // Not reached: configs that differ differ in a key. Said all the same rather than training apart.
  throw ConfigError(
      "the ranks' configs differ: the ranks of a run must share its config (the same file and --set on "
      "every host)");
}

}  // namespace

TrainSummary train_rank(TrainOptions options, const comm::RankEnvironment& environment) {
  const RunConfig& config = options.config;
  const std::int64_t stages = config.dist.stages;
  if (environment.world_size != config.dist.replicas * stages) {
    if (stages > 1 && environment.world_size % stages != 0) {
      // dist.replicas = 0 took WORLD_SIZE / dist.stages rounded down: naming it as the fix fixed nothing.
      throw ConfigError(fmt::format(
          "WORLD_SIZE ({}) is not a multiple of dist.stages ({}): every pipeline replica has dist.stages ranks. "
          "Start `loco launch --nproc {}` (or another multiple of {})",
          environment.world_size, stages, std::max<std::int64_t>(environment.world_size / stages, 1) * stages, stages));
    }
    if (stages > 1) {
      throw ConfigError(fmt::format(
          "dist.replicas ({}) pipelines of dist.stages ({}) stages are {} ranks, but WORLD_SIZE is {}: start "
          "`loco launch --nproc {}`, or set dist.replicas = 0 to take WORLD_SIZE / dist.stages",
          config.dist.replicas, stages, config.dist.replicas * stages, environment.world_size,
          config.dist.replicas * stages));
    }
    throw ConfigError(fmt::format("dist.replicas is {} but WORLD_SIZE is {}; set dist.replicas = 0 to take it from "
                                  "the launcher",
                                  config.dist.replicas, environment.world_size));
  }
  if (environment.rank == 0) loco::print_unchecked(stderr, "resolved config:\n{}\n", to_toml(config));
  // Note "blas-pool": ranks that share a machine would each keep a pool of one BLAS thread per core.
  if (environment.local_world_size > 1) limit_blas_threads(config.train.threads);
  const comm::Timeout timeout = comm_timeout(config.comm);
  const comm::GroupOptions replica_options =
      group_options(config.comm, static_cast<int>(config.dist.replicas), options.stop_requested);
  // Every rank meets the others in the world group first, and checks there that they share the config: ranks of
  // other dist.stages would otherwise wait in groups of other shapes until comm.timeout_s.
  auto world = comm::connect_from_environment(environment, config.dist.backend, replica_options, timeout);
  require_all_or_none_resumed(*world, options.resume_from.has_value());
  require_same_config(*world, config);
  if (stages > 1) {
    const auto groups =
        comm::connect_pipeline_groups(std::move(world), environment, config.dist.backend, static_cast<int>(stages),
                                      pipeline_group_options(config, options.stop_requested), replica_options, timeout);
    options.pipeline = groups.pipeline.get();
    if (algorithm_named(config.dist.algorithm) != Algorithm::none) options.group = groups.stage.get();
    return Trainer(options).run();
  }
  options.group = world.get();
  return Trainer(options).run();
}

}  // namespace loco::run
