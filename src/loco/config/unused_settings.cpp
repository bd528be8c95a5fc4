#include "loco/config/unused_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "loco/config/algorithms.h"
#include "loco/config/config_keys.h"

namespace loco {

namespace {

// Why `key` is not read by the run of `c`, or nothing when it is (or may be).
using UnusedReason = std::optional<std::string> (*)(const ConfigKey& key, const RunConfig& c);

// The strategies whose outer step exchanges dense pseudo-gradients through comm.codec or streaming.codec and
// combines them by dist.aggregation (algo/diloco.h).
bool averages_pseudo_gradients(Algorithm a) {
  return a == Algorithm::diloco || a == Algorithm::localsgd || a == Algorithm::streaming || a == Algorithm::sparseloco;
}

// A config may carry the sections of several algorithms (the presets tune [diloco] and [streaming] for a switch of
// dist.algorithm by --set). Keys of one meaning in several of them (the outer step's H, η and μ) are named only
// where they look meant for this run: the run's own key of that name is left at its default. Any other key of
// another algorithm's section is named where it is changed (diloco.drop_rate under streaming, [ddp] under DiLoCo).
std::optional<std::string> algorithm_section(const ConfigKey& key, const RunConfig& c) {
  if (!find_algorithm(key.section) || key.section == c.dist.algorithm) return std::nullopt;
  static const std::set<std::string> kOneMeaning = {"sync_every", "outer_lr", "outer_momentum"};
  if (kOneMeaning.count(key.name) == 0) {
    return fmt::format("dist.algorithm = \"{}\" reads no [{}] key", c.dist.algorithm, key.section);
  }
  const ConfigKey* own = find_config_key(c.dist.algorithm, key.name);
  const RunConfig defaults;
  if (own == nullptr || own->get(c) != own->get(defaults)) return std::nullopt;
  return fmt::format("dist.algorithm = \"{}\" reads {} instead, left at its default {}", c.dist.algorithm,
                     own->dotted(), format_config_value(own->get(defaults)));
}

std::optional<std::string> pipeline_section(const ConfigKey& key, const RunConfig& c) {
  if (key.section != "pipeline" || c.dist.stages > 1) return std::nullopt;
  return std::string("[pipeline] shapes a replica split into stages, and dist.stages = 1 splits none");
}

std::optional<std::string> aggregation_parameter(const ConfigKey& key, const RunConfig& c) {
  if (key.section != "dist") return std::nullopt;
  const char* rule = key.name == "trim"                                           ? "trimmed_mean"
                     : key.name == "clip_iterations" || key.name == "clip_radius" ? "centered_clip"
                                                                                  : nullptr;
  if (rule == nullptr || c.dist.aggregation == rule) return std::nullopt;
  return fmt::format("it is a parameter of dist.aggregation = \"{}\", and this run aggregates by \"{}\"", rule,
                     c.dist.aggregation);
}

std::optional<std::string> check_sync(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() != "dist.check_sync" || averages_pseudo_gradients(algorithm_named(c.dist.algorithm))) {
    return std::nullopt;
  }
  return fmt::format(
      "it compares the replicas after an outer step of diloco, localsgd, streaming or sparseloco, "
      "and dist.algorithm = \"{}\" has none",
      c.dist.algorithm);
}

// A single replica exchanges nothing with other replicas, whatever its algorithm: no link to emulate, no rounds.
// Its stages, where it has them, pass activations over [pipeline]'s link, and wait for each other comm.timeout_s.
// (Its codec still quantises its own Δ in the DiLoCo family: comm.block_size is not named here.)
std::optional<std::string> link_of_a_lone_replica(const ConfigKey& key, const RunConfig& c) {
  if (key.section != "comm" || key.name == "codec" || key.name == "block_size") return std::nullopt;
  if (c.dist.replicas > 1 || c.dist.elastic || (c.dist.stages > 1 && key.name == "timeout_s")) return std::nullopt;
  return c.dist.stages > 1 ? std::string(
                                 "a single replica (dist.replicas = 1) exchanges nothing with others; its "
                                 "stages' link is [pipeline]'s")
                           : std::string("a single replica (dist.replicas = 1, dist.stages = 1) exchanges nothing");
}

// Replicas that meet at every step (one alone, data parallel) check for a stop there; an elastic member stops
// after its current step (stop_checks.h).
std::optional<std::string> stop_check_every(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() != "train.stop_check_every") return std::nullopt;
  if (c.dist.elastic) return std::string("an elastic member stops after its current step");
  if (c.dist.replicas == 1) return std::string("a single replica checks for a stop every step");
  if (algorithm_named(c.dist.algorithm) == Algorithm::ddp) {
    return std::string("data parallel replicas meet, and check for a stop, every step");
  }
  return std::nullopt;
}

std::optional<std::string> codec_block_size(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() != "comm.block_size") return std::nullopt;
  const Algorithm algorithm = algorithm_named(c.dist.algorithm);
  const bool outer_step_quantised = averages_pseudo_gradients(algorithm) && algorithm != Algorithm::sparseloco &&
                                    quantising_codec(c.exchange().codec);
  const bool stages_quantised = c.dist.stages > 1 && quantising_codec(c.pipeline.codec);
  if (outer_step_quantised || stages_quantised) return std::nullopt;
  return std::string(
      "it sizes the scale blocks of the int8, fp4 and int4 codecs, and this run quantises nothing "
      "with them");
}

std::optional<std::string> link_delay(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() != "comm.delay" || !c.comm.bandwidth_mbps.empty() || !c.comm.latency_ms.empty()) {
    return std::nullopt;
  }
  return std::string(
      "it says how an emulated link shows in real time, and comm.bandwidth_mbps and comm.latency_ms "
      "emulate none");
}

std::optional<std::string> streaming_mix(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() != "streaming.mix" || c.streaming.overlap > 0 || c.streaming.overlap_auto) return std::nullopt;
  return std::string("it mixes an overlapped exchange's result in, and streaming.overlap = 0 overlaps none");
}

std::optional<std::string> schedule_parameter(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() == "optim.decay_fraction" && c.optim.schedule != "wsd") {
    return fmt::format("it is the decay of optim.schedule = \"wsd\", and this run's schedule is \"{}\"",
                       c.optim.schedule);
  }
  if (key.dotted() == "optim.min_lr_ratio" && c.optim.schedule == "constant") {
    return std::string("optim.schedule = \"constant\" keeps optim.lr after its warm-up");
  }
  return std::nullopt;
}

std::optional<std::string> cuda_graphs(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() != "train.cuda_graphs" || c.train.device != "cpu") return std::nullopt;
  return std::string("this run trains on the CPU, which launches no CUDA kernels");
}

// A single replica's batch is the whole batch, split or not.
std::optional<std::string> batch_of_a_lone_replica(const ConfigKey& key, const RunConfig& c) {
  if (key.dotted() != "dist.batch" || c.dist.replicas > 1 || c.dist.elastic) return std::nullopt;
  return std::string("a single replica's batch is the whole batch, \"split\" or \"per_replica\"");
}

// A period no shorter than the run acts only at its last step, as 0 does.
std::optional<std::string> period_beyond_the_run(const ConfigKey& key, const RunConfig& c) {
  const std::int64_t every = key.dotted() == "train.checkpoint_every" ? c.train.checkpoint_every
                             : key.dotted() == "train.eval_every"     ? c.train.eval_every
                                                                      : 0;
  if (c.train.steps <= 0 || every < c.train.steps) return std::nullopt;
  return fmt::format("train.steps = {} ends the run by then: each acts at the last step alone, as 0 does",
                     c.train.steps);
}

// The first reason that applies wins: a [pipeline] key of a lone replica is said once, under [pipeline].
const std::vector<UnusedReason>& unused_reasons() {
  static const std::vector<UnusedReason> reasons = {algorithm_section,    pipeline_section, aggregation_parameter,
                                                    check_sync,           codec_block_size, link_of_a_lone_replica,
                                                    link_delay,           streaming_mix,    schedule_parameter,
                                                    cuda_graphs,          stop_check_every, batch_of_a_lone_replica,
                                                    period_beyond_the_run};
  return reasons;
}

// Schedules a run's length leaves unused, whether their keys were changed or not (a run of 50 steps under the
// default warm-up of 100 never reaches optim.lr).
std::vector<std::string> schedule_notes(const RunConfig& c) {
  const OptimConfig& o = c.optim;
  const std::int64_t steps = c.train.steps;
  std::vector<std::string> notes;
  if (o.warmup_steps >= steps && steps > 0) {
    notes.push_back(fmt::format(
        "optim.schedule = \"{}\" has no effect: optim.warmup_steps = {} is not below train.steps = {}, so the "
        "learning rate rises for the whole run, to {:.3g} ({:.0f}% of optim.lr), and never decays",
        o.schedule, o.warmup_steps, steps, o.lr * static_cast<double>(steps) / static_cast<double>(o.warmup_steps),
        100.0 * static_cast<double>(steps) / static_cast<double>(o.warmup_steps)));
  } else if (o.schedule == "wsd" && std::llround(o.decay_fraction * static_cast<double>(steps)) == 0) {
    notes.push_back(
        fmt::format("optim.decay_fraction = {} has no effect: {} of train.steps = {} rounds to no decay "
                    "step, so optim.schedule = \"wsd\" keeps optim.lr to the end",
                    format_config_value(o.decay_fraction), o.decay_fraction, steps));
  }
  return notes;
}

}  // namespace

std::vector<std::string> unused_settings(const RunConfig& config) {
  const RunConfig defaults;
  // Reasons in the order first met, each with its keys: one sentence per reason.
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const ConfigKey& key : config_keys()) {
    const ConfigValue value = key.get(config);
    if (value == key.get(defaults)) continue;
    for (const UnusedReason& reason : unused_reasons()) {
      const std::optional<std::string> why = reason(key, config);
      if (!why) continue;
      const std::string setting = fmt::format("{} = {}", key.dotted(), format_config_value(value));
      auto found = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& r) { return r.first == *why; });
      if (found == by_reason.end()) {
        by_reason.push_back({*why, {setting}});
      } else {
        found->second.push_back(setting);
      }
      break;
    }
  }
  std::vector<std::string> sentences = schedule_notes(config);
  for (const auto& [why, settings] : by_reason) {
    sentences.push_back(
        fmt::format("{} {} no effect: {}", fmt::join(settings, ", "), settings.size() == 1 ? "has" : "have", why));
  }
  return sentences;
}

std::optional<std::string> why_not_read(const std::string& dotted, const RunConfig& config) {
  const auto dot = dotted.find('.');
  const ConfigKey* key =
      dot == std::string::npos ? nullptr : find_config_key(dotted.substr(0, dot), dotted.substr(dot + 1));
  if (key == nullptr) return std::nullopt;
  if (find_algorithm(key->section) && key->section != config.dist.algorithm) {
    return fmt::format("dist.algorithm = \"{}\" reads no [{}] key", config.dist.algorithm, key->section);
  }
  for (const UnusedReason& reason : unused_reasons()) {
    if (auto why = reason(*key, config)) return why;
  }
  return std::nullopt;
}

}  // namespace loco
