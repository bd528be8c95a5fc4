#include "loco/sim/algorithm_spec.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <sstream>

#include "loco/util/error.h"
#include "loco/util/parse_number.h"

namespace loco::sim {

namespace {

constexpr const char* kAcceptedNames = "dp (or ddp), diloco, streaming, noloco";
constexpr const char* kAcceptedKeys = "h, fragments, fragment_layers, tau, bits";

Algorithm parse_name(const std::string& name, const std::string& spec) {
  if (name == "dp" || name == "ddp" || name == "data_parallel") return Algorithm::kDataParallel;
  if (name == "diloco") return Algorithm::kDiLoCo;
  if (name == "streaming") return Algorithm::kStreaming;
  if (name == "noloco") return Algorithm::kNoLoCo;
  throw ConfigError(fmt::format("unknown algorithm '{}' in '{}'; use one of {}.", name, spec, kAcceptedNames));
}

double parse_number(const std::string& key, const std::string& value, const std::string& spec) {
  const auto x = parse_whole_number(value);
  if (!x) {
    throw ConfigError(fmt::format("'{}={}' in algorithm '{}' is not a finite number.", key, value, spec));
  }
  return *x;
}

int parse_count(const std::string& key, const std::string& value, const std::string& spec) {
  double x = parse_number(key, value, spec);
  if (x != std::floor(x) || x < 0 || x > 1e9) {
    throw ConfigError(fmt::format("'{}={}' in algorithm '{}' must be a whole number.", key, value, spec));
  }
  return static_cast<int>(x);
}

std::string format_number(double x) { return fmt::format("{:g}", x); }

}  // namespace

std::string AlgorithmSpec::label() const {
  std::string bits_part = bits > 0 ? ",bits=" + format_number(bits) : "";
  switch (kind) {
    case Algorithm::kDataParallel:
      return bits > 0 ? "dp(bits=" + format_number(bits) + ")" : "dp";
    case Algorithm::kDiLoCo:
    case Algorithm::kNoLoCo: {
      std::string name = kind == Algorithm::kDiLoCo ? "diloco" : "noloco";
      std::string tau = overlap_steps > 0 ? fmt::format(",tau={}", overlap_steps) : "";
      return fmt::format("{}(H={}{}{})", name, inner_steps, tau, bits_part);
    }
    case Algorithm::kStreaming:
      return fmt::format("streaming(H={},P={},tau={}{})", inner_steps, fragments, overlap_steps, bits_part);
  }
  return "?";
}

AlgorithmSpec parse_algorithm(const std::string& text, const AlgorithmDefaults& defaults, int layers) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ':');) parts.push_back(part);
  if (parts.empty() || parts[0].empty()) {
    throw ConfigError(fmt::format("empty algorithm in '{}'; use one of {}.", text, kAcceptedNames));
  }
  AlgorithmSpec spec;
  spec.kind = parse_name(parts[0], text);
  spec.inner_steps = spec.kind == Algorithm::kDataParallel ? 1 : defaults.inner_steps;
  spec.overlap_steps = spec.kind == Algorithm::kStreaming ? defaults.overlap_steps : 0;
  spec.bits = defaults.bits;
  int fragment_layers = defaults.fragment_layers;
  int fragments = 0;  // 0: from fragment_layers
  bool gave_h = false, gave_tau = false, gave_fragment_layers = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    auto eq = parts[i].find('=');
    if (eq == std::string::npos) {
      throw ConfigError(
          fmt::format("'{}' in algorithm '{}' is not key=value; keys: {}.", parts[i], text, kAcceptedKeys));
    }
    std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (key == "h") {
      spec.inner_steps = parse_count(key, value, text);
      gave_h = true;
    } else if (key == "fragments") {
      fragments = parse_count(key, value, text);
      if (fragments < 1) {  // 0 is not "from fragment_layers": that is leaving the key out
        throw ConfigError(fmt::format("fragments={} in algorithm '{}' must be at least 1 (or leave it out: "
                                      "fragment_layers decides)", value, text));
      }
    } else if (key == "fragment_layers") {
      fragment_layers = parse_count(key, value, text);
      gave_fragment_layers = true;
    } else if (key == "tau") {
      spec.overlap_steps = parse_count(key, value, text);
      gave_tau = true;
    } else if (key == "bits") {
      spec.bits = parse_number(key, value, text);
      if (spec.bits <= 0) {
        throw ConfigError(
            fmt::format("bits={} in algorithm '{}' must be positive (4 for FP4, 16 for "
                        "bf16).",
                        value, text));
      }
    } else {
      throw ConfigError(fmt::format("unknown key '{}' in algorithm '{}'; keys: {}.", key, text, kAcceptedKeys));
    }
  }
  spec.took_inner_steps = spec.kind != Algorithm::kDataParallel && !gave_h;
  spec.took_overlap_steps = spec.kind == Algorithm::kStreaming && !gave_tau;
  spec.took_fragment_layers = spec.kind == Algorithm::kStreaming && fragments == 0 && !gave_fragment_layers;
  if (spec.kind == Algorithm::kStreaming) {
    if (fragments == 0) {
      if (fragment_layers < 1) {
        throw ConfigError(fmt::format("fragment_layers must be at least 1 in '{}'.", text));
      }
      fragments = static_cast<int>((std::int64_t{layers} + fragment_layers - 1) / fragment_layers);  // no int overflow
    }
    spec.fragments = fragments;
  } else if (fragments > 1) {
    throw ConfigError(
        fmt::format("'{}' has fragments={} but only streaming splits the model into "
                    "fragments; write streaming:fragments={}.",
                    text, fragments, fragments));
  }
  return spec;
}

std::vector<AlgorithmSpec> parse_algorithms(const std::string& comma_list, const AlgorithmDefaults& defaults,
                                            int layers) {
  std::vector<AlgorithmSpec> specs;
  std::stringstream stream(comma_list);
  for (std::string item; std::getline(stream, item, ',');) {
    specs.push_back(parse_algorithm(item, defaults, layers));
  }
  if (specs.empty()) {
    throw ConfigError(fmt::format("no algorithm given; use one or more of {}.", kAcceptedNames));
  }
  return specs;
}

void validate(const AlgorithmSpec& spec, const Scenario& scenario) {
  const std::string label = spec.label();
  if (spec.inner_steps < 1) {
    throw ConfigError(fmt::format("{}: H (inner steps between synchronisations) must be at least 1.", label));
  }
  if (spec.kind == Algorithm::kDataParallel && spec.overlap_steps != 0) {
    throw ConfigError(
        "dp: data parallel has no overlap τ; its gradient reduction already overlaps "
        "the backward pass. Remove tau.");
  }
  if (spec.fragments < 1 || spec.fragments > scenario.layers) {
    throw ConfigError(
        fmt::format("{}: {} fragments for {} layers; a fragment holds at least one layer, "
                    "so use between 1 and {} fragments.",
                    label, spec.fragments, scenario.layers, scenario.layers));
  }
  if (spec.overlap_steps >= spec.inner_steps) {
    throw ConfigError(
        fmt::format("{}: the overlap τ={} must be smaller than H={}, or a fragment's "
                    "result would arrive after its next synchronisation has started.",
                    label, spec.overlap_steps, spec.inner_steps));
  }
  if (spec.kind == Algorithm::kStreaming && spec.fragments > spec.inner_steps) {
    throw ConfigError(
        fmt::format("{}: {} fragments cannot take turns within H={} steps; use at most H "
                    "fragments.",
                    label, spec.fragments, spec.inner_steps));
  }
  if (!std::isfinite(spec.bits) || spec.bits < 0) {
    throw ConfigError(fmt::format("{}: bits per value must be positive.", label));
  }
  if (spec.kind == Algorithm::kNoLoCo && scenario.replicas < 2) {
    throw ConfigError(
        "noloco averages each replica with a partner, so it needs at least 2 replicas; "
        "raise --replicas.");
  }
}

}  // namespace loco::sim
