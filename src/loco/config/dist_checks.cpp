#include "loco/config/dist_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "loco/config/adversary.h"
#include "loco/config/algorithms.h"
#include "loco/config/churn_schedule.h"
#include "loco/util/error.h"
#include "loco/util/parse_number.h"
#include "loco/util/round_kib.h"
#include "loco/util/seconds_since.h"

namespace loco {

namespace {

constexpr std::int64_t kMostClipIterations = 1000;

[[noreturn]] void reject(const std::string& message) { throw ConfigError(message); }

bool has_outer_step(Algorithm algorithm) {
  return algorithm == Algorithm::diloco || algorithm == Algorithm::localsgd || algorithm == Algorithm::streaming ||
         algorithm == Algorithm::sparseloco;
}

// What every elastic run needs, whatever its algorithm (the strategies' own limits: strategy_checks.cpp).
// Note "elastic-data" (elastic/round_layout.h): members come and go, so each trains on its own batch.
void check_elastic_run(const RunConfig& c) {
  if (algorithm_named(c.dist.algorithm) == Algorithm::none) {
    reject(fmt::format("dist.elastic = true needs an algorithm that exchanges (diloco, localsgd, streaming, "
                       "sparseloco, noloco or ddp), not {}",
                       c.dist.algorithm));
  }
  if (c.dist.backend == "local" && c.dist.replicas < 1) {
    reject("dist.elastic = true with dist.backend = \"local\" runs dist.replicas replicas as threads: set "
           "dist.replicas to 1 or more");
  }
  if (c.dist.batch != "per_replica") {
    reject("dist.elastic = true needs dist.batch = \"per_replica\": the number of replicas changes during the run, "
           "so train.batch_size is each replica's batch");
  }
  if (!c.comm.bandwidth_mbps.empty() || !c.comm.latency_ms.empty()) {
    reject("comm.bandwidth_mbps / comm.latency_ms emulate the links of a fixed group of ranks; an elastic run's groups "
           "change with its members, so they are not emulated there: leave them empty and give the ranks real "
           "shaped links (scripts/netns_run.sh, docs/slow-links.md)");
  }
}

// Note "pipeline-stages" (docs/pipeline.md): what a replica split into stages needs so far. The layers per
// stage (pipeline.partition) are checked where the vocabulary is known (pipeline/partition.h).
void check_pipeline_run(const RunConfig& c) {
  const DistConfig& d = c.dist;
  if (d.stages > c.model.num_hidden_layers) {
    reject(fmt::format("dist.stages ({}) is more than model.num_hidden_layers ({}): each stage holds at least one "
                       "decoder layer; lower dist.stages or add layers",
                       d.stages, c.model.num_hidden_layers));
  }
  check_emulated_link("pipeline.bandwidth_mbps", c.pipeline.bandwidth_mbps, "pipeline.latency_ms",
                      c.pipeline.latency_ms, static_cast<int>(d.stages));
  if (d.elastic) {  // docs/pipeline.md "Churn": the stages are processes under loco launch --elastic
    if (d.backend == "local") {
      reject("dist.stages > 1 with dist.elastic = true runs each stage as a member process (loco launch --elastic "
             "--nproc R*S); stages as threads of elastic replicas are not built: set dist.backend = \"gloo\"");
    }
    if (c.pipeline.partition == "measured") {
      reject("pipeline.partition = \"measured\" with dist.elastic = true: members would measure apart, and twin "
             "stages must hold the same layers; give the split a static run measured (its config.toml names it) "
             "or \"balanced\"");
    }
    if (!d.churn.empty() || !d.adversary.empty()) {
      reject("dist.churn and dist.adversary name replicas of an elastic run; with dist.stages > 1 they are not "
             "built yet: kill a stage's process instead (LOCO_FAULT, bench/chaos.sh)");
    }
  }
}

}  // namespace

void check_emulated_link(const std::string& bandwidth_name, const std::string& bandwidth_mbps,
                         const std::string& latency_name, const std::string& latency_ms, int ranks) {
  constexpr double kLeastMbps = 1e-3, kMostMbps = 1e7, kMostLatencyMs = 60'000;
  std::vector<double> bandwidths, latencies;
  try {
    bandwidths = parse_per_rank_values(bandwidth_mbps, "bandwidth (Mbit/s)", ranks);
    latencies = parse_per_rank_values(latency_ms, "latency (ms)", ranks);
  } catch (const Error& e) {
    reject(fmt::format("{} / {}: {}", bandwidth_name, latency_name, e.what()));
  }
  for (const double mbps : bandwidths) {
    if (mbps != 0 && (mbps < kLeastMbps || mbps > kMostMbps)) {
      reject(fmt::format("{}: {} Mbit/s is outside what a link carries; give 0 (no limit) or {} to {:.0f} Mbit/s",
                         bandwidth_name, mbps, kLeastMbps, kMostMbps));
    }
  }
  for (const double ms : latencies) {
    if (ms > kMostLatencyMs) {
      reject(fmt::format("{}: {} ms is more than a minute one way; give at most {:.0f} ms", latency_name, ms,
                         kMostLatencyMs));
    }
  }
}


void check_dist_section(const RunConfig& c) {
  const DistConfig& d = c.dist;
  const Algorithm algorithm = algorithm_named(d.algorithm);
  if (d.replicas < 1) reject(fmt::format("dist.replicas ({}) must be at least 1", d.replicas));
  if (d.stages < 1) reject(fmt::format("dist.stages ({}) must be at least 1 (1: no pipeline)", d.stages));
  // Ranks are ints in c10d, and every replica is a thread or a process: far below this.
  constexpr std::int64_t kMaxReplicas = 1 << 16;
  if (d.replicas > kMaxReplicas) {
    reject(fmt::format("dist.replicas ({}) must be at most {}", d.replicas, kMaxReplicas));
  }
  if (algorithm == Algorithm::none && d.replicas > 1) {
    std::vector<std::string> connecting;
    for (const auto& entry : algorithm_registry()) {
      if (entry.algorithm != Algorithm::none) connecting.push_back(entry.name);
    }
    reject(fmt::format("dist.replicas = {} needs an algorithm that connects them; set dist.algorithm ({})",
                       d.replicas, fmt::join(connecting, ", ")));
  }
  if (d.batch == "split" && c.train.batch_size % d.replicas != 0) {
    reject(fmt::format("train.batch_size ({}) is the global batch (dist.batch = \"split\") and must divide "
                       "evenly among dist.replicas ({}); change one, or set dist.batch = \"per_replica\"",
                       c.train.batch_size, d.replicas));
  }
  if (d.aggregation != "mean" && !has_outer_step(algorithm)) {
    reject(fmt::format("dist.aggregation = \"{}\" combines the pseudo-gradients of an outer step: it needs "
                       "dist.algorithm diloco, localsgd, streaming or sparseloco, not {}",
                       d.aggregation, d.algorithm));
  }
  if (d.trim < 1) reject(fmt::format("dist.trim ({}) must be at least 1", d.trim));
  // An elastic run's count of members changes, and b is lowered to what each synchronisation's count allows
  // (docs/algorithms.md); a static run's is known here, and so is the most an elastic run of threads can have: a b
  // it cannot drop would silently be a smaller one (an elastic run of 2 threads with b = 5 was the mean).
  // (Compared as trim > most: 2·trim overflowed for trim of 2^62, and the check let it through.)
  const std::int64_t most = (d.replicas - 1) / 2;
  const bool members_known = !d.elastic || d.backend == "local";
  if (d.aggregation == "trimmed_mean" && members_known && d.replicas > 0 && d.trim > most) {
    reject(
        fmt::format("dist.trim ({}) drops that many of each coordinate's {} values from each end, but trimmed_mean "
                    "must keep at least one: with dist.replicas = {} {}",
                    d.trim, d.replicas, d.replicas,
                    most >= 1 ? fmt::format("set dist.trim to at most {}", most)
                              : std::string("no value can be dropped; use dist.aggregation = \"mean\" or "
                                            "\"median\", or more replicas")));
  }
  // Centered clipping settles in tens of iterations (20 by default); each one passes over every
  // replica's pseudo-gradient, so a count in the millions only stalls the outer step.
  if (d.clip_iterations < 1 || d.clip_iterations > kMostClipIterations) {
    reject(fmt::format("dist.clip_iterations ({}) must be between 1 and {}", d.clip_iterations, kMostClipIterations));
  }
  if (!(d.clip_radius > 0) || !std::isfinite(d.clip_radius)) {
    reject(fmt::format("dist.clip_radius ({}) must be a positive number", d.clip_radius));
  }
  if (!d.adversary.empty()) {
    parse_adversary(d.adversary, d.replicas);
    if (!has_outer_step(algorithm)) {
      reject("dist.adversary simulates a bad replica in the outer step of diloco, localsgd, streaming or sparseloco");
    }
  }
  if (d.stages > 1) check_pipeline_run(c);
  if (d.elastic) check_elastic_run(c);
  if (!d.churn.empty()) {
    if (!d.elastic) {
      reject("dist.churn schedules faults of an elastic run's replicas (threads with dist.backend = \"local\", or the "
             "ranks of loco launch --elastic): it needs dist.elastic = true");
    }
    parse_churn_schedule(d.churn, d.replicas, c.train.steps);
  }
  // Simulated replicas may share one GPU: their models and inner steps run there, while the outer step
  // works on host copies of the parameters (θ_g and the fragments' values live on the host), which is
  // what the local collectives exchange. Data parallel's buckets exchange device tensors, which the
  // host-side groups refuse (seen on an H100); elastic members have not been run on a GPU this way.
  if (d.backend == "local" && c.train.device != "cpu" && d.replicas > 1 && (d.algorithm == "ddp" || d.elastic)) {
    reject(fmt::format("dist.backend = \"local\" runs the replicas of {} on the CPU only; use train.device = "
                       "\"cpu\", or one process per GPU with dist.backend = \"nccl\" and loco launch. Replicas of "
                       "diloco, localsgd, streaming and noloco may share a GPU",
                       d.elastic ? "an elastic run" : "ddp"));
  }
}

void check_comm_section(const RunConfig& c) {
  // comm::kMaxCodecBlockSize (comm/codecs/codec.h, which config, a sibling layer, cannot include): named here
  // with the key, before any replica starts.
  constexpr std::int64_t kMaxBlockSize = std::int64_t{1} << 20;
  if (c.comm.block_size <= 0 || c.comm.block_size > kMaxBlockSize) {
    reject(fmt::format("comm.block_size ({}) must be from 1 to {} values per scale; 128 is the default",
                       c.comm.block_size, kMaxBlockSize));
  }
  if (!(c.comm.timeout_s > 0) || c.comm.timeout_s > kLongestWaitSeconds) {
    reject(fmt::format("comm.timeout_s ({}) must be positive and at most {:.0f} (11.6 days)", c.comm.timeout_s,
                       kLongestWaitSeconds));
  }
  if (c.comm.round_kib != "auto" && c.comm.round_kib != "off" && !round_kib_bytes(c.comm.round_kib)) {
    reject(round_kib_error("comm.round_kib", c.comm.round_kib));
  }
  check_emulated_link("comm.bandwidth_mbps", c.comm.bandwidth_mbps, "comm.latency_ms", c.comm.latency_ms,
                      static_cast<int>(c.dist.replicas));
}

}  // namespace loco
