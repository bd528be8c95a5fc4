#include "loco/sim/scenario.h"

#include <cmath>

#include "loco/util/error.h"

namespace loco::sim {

namespace {

void require_positive(double value, const char* what, const char* option, const char* example) {
  if (!std::isfinite(value) || value <= 0) {
    throw ConfigError(
        fmt::format("{} must be a positive finite number (got {}); set it with {}, "
                    "for example {}.",
                    what, value, option, example));
  }
}

void require_latency(const Link& link, const char* which, const char* lat_option) {
  if (!std::isfinite(link.latency_s) || link.latency_s < 0) {
    throw ConfigError(
        fmt::format("the {} latency must be zero or positive seconds (got {}); set it "
                    "with {}, for example {} 0.01.",
                    which, link.latency_s, lat_option, lat_option));
  }
}

}  // namespace

void validate_bandwidth_gbps(double gbps, const char* which, const char* example) {
  constexpr double kMinGbps = kMinBandwidthBps / 1e9, kMaxGbps = kMaxBandwidthBps / 1e9;
  if (!(gbps >= kMinGbps && gbps <= kMaxGbps)) {
    throw ConfigError(
        fmt::format("the {} bandwidth must lie between {:g} and {:g} Gbit/s (1 kbit/s to 1 Ebit/s; got {:g} "
                    "Gbit/s): a link without bandwidth never finishes a transfer, and none is faster than that. Give "
                    "the link's rate in Gbit/s, for example {}.",
                    which, kMinGbps, kMaxGbps, gbps, example));
  }
}

void validate(const Scenario& s) {
  require_positive(s.params, "the parameter count", "--params or --config", "--params 1e9");
  if (s.layers < 1) {
    throw ConfigError(
        fmt::format("the model needs at least one layer (got {}); set --layers or use "
                    "--config with [model] num_hidden_layers.",
                    s.layers));
  }
  require_positive(s.step_time_s, "the step time", "--step-time (seconds) or --batch-tokens", "--step-time 0.1");
  if (!(s.forward_share > 0 && s.forward_share < 1)) {
    throw ConfigError(
        fmt::format("--forward-share must lie strictly between 0 and 1 (got {}); the "
                    "usual value is 1/3 (backward costs twice the forward).",
                    s.forward_share));
  }
  if (s.replicas < 1 || s.workers < 1) {
    throw ConfigError(
        fmt::format("--workers and --replicas must be at least 1 (got {} and {}).", s.workers, s.replicas));
  }
  if (s.replicas > s.workers) {
    throw ConfigError(
        fmt::format("more replicas ({}) than workers ({}): every replica needs at least "
                    "one worker. Lower --replicas or raise --workers.",
                    s.replicas, s.workers));
  }
  if (s.workers % s.replicas != 0) {
    throw ConfigError(
        fmt::format("{} workers cannot be split evenly into {} replicas; make --workers "
                    "a multiple of --replicas.",
                    s.workers, s.replicas));
  }
  require_positive(s.bits, "bits per exchanged value", "--bits", "--bits 16");
  require_latency(s.inter, "inter-replica", "--latency");
  require_latency(s.intra, "intra-replica", "--intra-latency");
  validate_bandwidth_gbps(s.intra.bandwidth_bps / 1e9, "intra-replica", "--intra-bandwidth 400");
}

void validate_inter_bandwidth(double bandwidth_bps) {
  validate_bandwidth_gbps(bandwidth_bps / 1e9, "inter-replica", "--bandwidth 10");
}

}  // namespace loco::sim
