#include "loco/config/strategy_checks.h"

#include <fmt/format.h>

#include "loco/config/algorithms.h"
#include "loco/util/error.h"

namespace loco {

namespace {

bool chosen(const RunConfig& c, Algorithm algorithm) { return algorithm_named(c.dist.algorithm) == algorithm; }

void require_sync_every(const char* key, std::int64_t h) {
  if (h <= 0) throw ConfigError(fmt::format("{} ({}) must be positive: the inner steps between synchronisations", key, h));
}

// η and μ of an outer Nesterov step (algo/outer_nesterov.h).
void require_outer_step(const char* section, double outer_lr, double outer_momentum) {
  if (!(outer_lr > 0)) throw ConfigError(fmt::format("{}.outer_lr ({}) must be positive", section, outer_lr));
  if (!(outer_momentum >= 0 && outer_momentum < 1)) {
    throw ConfigError(fmt::format("{}.outer_momentum ({}) must lie in [0, 1)", section, outer_momentum));
  }
}

}  // namespace

void check_ddp_section(const RunConfig& c) {
  if (!chosen(c, Algorithm::ddp)) return;
  const DdpConfig defaults;
  constexpr double kMostMib = 1 << 20;  // a mebibyte short of a tebibyte: beyond any model's gradient
  const std::pair<const char*, std::pair<double, double>> sizes[] = {
      {"ddp.bucket_mb", {c.ddp.bucket_mb, defaults.bucket_mb}},
      {"ddp.first_bucket_mb", {c.ddp.first_bucket_mb, defaults.first_bucket_mb}}};
  for (const auto& [key, value] : sizes) {
    // 0 closes a bucket after each parameter (one all-reduce per parameter), as runs have used it.
    if (!(value.first >= 0 && value.first <= kMostMib)) {
      throw ConfigError(
          fmt::format("{} ({}) must be a size in MiB from 0 (a bucket per parameter) to {:.0f} (the "
                      "default is {})",
                      key, value.first, kMostMib, value.second));
    }
  }
  if (!c.dist.elastic) return;
  // Elastic data parallel exchanges the whole gradient once the step's quorum is known (elastic/elastic_ddp.h):
  // the keys that shape a static run's buckets would be accepted and never read.
  if (c.ddp.bucket_mb != defaults.bucket_mb || c.ddp.first_bucket_mb != defaults.first_bucket_mb ||
      c.ddp.overlap != defaults.overlap) {
    throw ConfigError(fmt::format("dist.elastic = true exchanges data parallel's gradients in one piece after "
                                  "backward, once each step's quorum is known: ddp.bucket_mb, ddp.first_bucket_mb "
                                  "and ddp.overlap shape the buckets of a run without dist.elastic and do not apply. "
                                  "Leave them at their defaults ({}, {}, {})",
                                  defaults.bucket_mb, defaults.first_bucket_mb, defaults.overlap));
  }
}

void check_diloco_section(const RunConfig& c) {
  require_sync_every("diloco.sync_every", c.diloco.sync_every);
  require_outer_step("diloco", c.diloco.outer_lr, c.diloco.outer_momentum);
  if (!(c.diloco.drop_rate >= 0 && c.diloco.drop_rate < 1)) {
    throw ConfigError(fmt::format("diloco.drop_rate ({}) must lie in [0, 1)", c.diloco.drop_rate));
  }
}

void check_localsgd_section(const RunConfig& c) {
  require_sync_every("localsgd.sync_every", c.localsgd.sync_every);
  if (c.localsgd.qsr_alpha < 0) throw ConfigError("localsgd.qsr_alpha must be 0 (fixed H) or positive");
}

void check_streaming_section(const RunConfig& c) {
  const StreamingConfig& s = c.streaming;
  require_sync_every("streaming.sync_every", s.sync_every);
  require_outer_step("streaming", s.outer_lr, s.outer_momentum);
  if (s.fragments < 1 || (chosen(c, Algorithm::streaming) && s.fragments > c.model.num_hidden_layers)) {
    throw ConfigError(fmt::format("streaming.fragments ({}) must lie in [1, model.num_hidden_layers = {}]: every "
                                  "fragment holds at least one transformer block",
                                  s.fragments, c.model.num_hidden_layers));
  }
  if (s.overlap < 0 || s.overlap >= s.sync_every) {
    throw ConfigError(fmt::format("streaming.overlap ({}) must lie in [0, streaming.sync_every = {}): a fragment's "
                                  "exchange must land before its next one starts",
                                  s.overlap, s.sync_every));
  }
  if (s.overlap_auto && s.sync_every < 2) {
    throw ConfigError(fmt::format("streaming.overlap_auto = true needs streaming.sync_every of 2 or more (it is {}): "
                                  "tau lies in [1, streaming.sync_every - 1]",
                                  s.sync_every));
  }
  if (!(s.mix >= 0 && s.mix <= 1)) throw ConfigError(fmt::format("streaming.mix ({}) must lie in [0, 1]", s.mix));
  if (!chosen(c, Algorithm::streaming)) return;
  // Fragment p synchronises at t mod H = p·⌊H/P⌋: with more fragments than H, ⌊H/P⌋ = 0 and all of them
  // synchronised at once, DiLoCo with P momentum buffers, without a word.
  const std::int64_t fragments = s.fragments + (s.embeddings_fragment ? 1 : 0);
  if (s.sync_every < fragments) {
    throw ConfigError(
        fmt::format("streaming.sync_every ({}) is below the number of fragments ({}{}): the fragments "
                    "synchronise in turn, one every sync_every / fragments steps, and would all "
                    "synchronise at once. Raise streaming.sync_every to {} or more, or lower "
                    "streaming.fragments",
                    s.sync_every, fragments, s.embeddings_fragment ? ", with the embeddings' own" : "", fragments));
  }
  if (!c.dist.elastic) return;
  // Note "elastic-overlap" (elastic/quorum_membership.h): one exchange in flight at most, none at a
  // synchronisation point.
  if (s.overlap_auto) {
    throw ConfigError("dist.elastic = true with streaming.overlap_auto = true: an elastic member keeps one exchange "
                      "in flight at most, so tau cannot grow with the exchange there; set streaming.overlap instead");
  }
  const std::int64_t spacing = s.sync_every / fragments;
  if (s.overlap > 0 && s.overlap >= spacing) {
    throw ConfigError(fmt::format("dist.elastic = true with streaming needs streaming.overlap ({}) below the spacing "
                                  "of its fragments' synchronisations, streaming.sync_every / fragments = {}: an "
                                  "elastic member has one exchange in flight at most. Lower streaming.overlap, or "
                                  "raise streaming.sync_every",
                                  s.overlap, spacing));
  }
}

void check_noloco_section(const RunConfig& c) {
  const NolocoConfig& n = c.noloco;
  require_sync_every("noloco.sync_every", n.sync_every);
  if (!(n.momentum >= 0 && n.momentum < 1) || !(n.beta > 0) || !(n.gamma > 0)) {
    throw ConfigError("noloco.momentum must lie in [0, 1); noloco.beta and noloco.gamma must be positive");
  }
}

void check_sparseloco_section(const RunConfig& c) {
  const SparselocoConfig& s = c.sparseloco;
  require_sync_every("sparseloco.sync_every", s.sync_every);
  require_outer_step("sparseloco", s.outer_lr, 0);
  if (!(s.beta >= 0 && s.beta <= 1)) throw ConfigError(fmt::format("sparseloco.beta ({}) must lie in [0, 1]", s.beta));
  // A tile holds at most 64 x 64 values; a tile smaller than k sends all of it.
  if (s.topk < 2 || s.topk > 4096) {
    throw ConfigError(fmt::format("sparseloco.topk ({}) must lie in [2, 4096]: the values sent per tile of up to "
                                  "64 x 64 (64 sends 1.56% of them)",
                                  s.topk));
  }
  if (s.bits != 2 && s.bits != 4) throw ConfigError(fmt::format("sparseloco.bits ({}) must be 2 or 4", s.bits));
  if (!chosen(c, Algorithm::sparseloco)) return;
  if (c.dist.aggregation == "centered_clip") {
    throw ConfigError("dist.aggregation = \"centered_clip\" starts from the median of every replica's whole vector, "
                      "which sparse contributions do not have: with sparseloco use mean, clip, median or trimmed_mean");
  }
}

void require_comm_codec_used(const RunConfig& c) {
  if (c.comm.codec == "fp32" || chosen(c, Algorithm::diloco) || chosen(c, Algorithm::localsgd)) return;
  const char* instead = chosen(c, Algorithm::streaming)    ? "Streaming DiLoCo quantises with streaming.codec (fp4 by "
                                                             "default): set that instead"
                        : chosen(c, Algorithm::sparseloco) ? "sparseloco sends its own sparse values at "
                                                             "sparseloco.bits bits"
                        : chosen(c, Algorithm::ddp)        ? "data parallel all-reduces its gradients in fp32"
                        : chosen(c, Algorithm::noloco)     ? "NoLoCo averages with its partner in fp32"
                                                           : "a single replica (dist.algorithm = \"none\") exchanges "
                                                             "nothing";
  throw ConfigError(
      fmt::format("comm.codec = \"{}\" quantises the dense exchanges of diloco and localsgd only; {}. "
                  "Remove comm.codec",
                  c.comm.codec, instead));
}

void check_strategy_sections(const RunConfig& c) {
  check_ddp_section(c);
  check_diloco_section(c);
  check_localsgd_section(c);
  check_streaming_section(c);
  check_noloco_section(c);
  check_sparseloco_section(c);
}

}  // namespace loco
