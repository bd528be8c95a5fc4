#include "loco/config/load_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <toml.hpp>

#include "loco/config/algorithms.h"
#include "loco/config/adversary.h"
#include "loco/config/churn_schedule.h"
#include "loco/config/config_keys.h"
#include "loco/config/toml_text.h"
#include "loco/util/error.h"
#include "loco/util/parse_number.h"

namespace loco {

namespace {

const ConfigKey& require_key(const std::string& section, const std::string& name, const std::string& where) {
  if (const ConfigKey* key = find_config_key(section, name)) return *key;
  std::string dotted = section + "." + name;
  throw ConfigError(fmt::format(
      "unknown config key '{}' ({}). {}Run `loco train --help-config` for the list of keys.", dotted,
      where, suggest_config_key(dotted)));
}

ConfigValue parse_text_value(const ConfigKey& key, const std::string& text) {
  const ConfigValue current = key.get(RunConfig{});
  auto bad = [&](const char* expected) {
    return ConfigError(fmt::format("'{}' for {} is not {}; give it like {}={}", text, key.dotted(),
                                   expected, key.dotted(), format_config_value(current)));
  };
  switch (current.index()) {
    case 0: {  // integer
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno == ERANGE) throw bad("an integer");
      return static_cast<std::int64_t>(v);
    }
    case 1: {  // float
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v)) throw bad("a finite number");
      return v;
    }
    case 2:  // boolean
      if (text == "true") return true;
      if (text == "false") return false;
      throw bad("true or false");
    default: {
      std::string s = text;
      if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
      return s;
    }
  }
}

ConfigValue toml_to_value(const ConfigKey& key, const toml::value& v, const std::string& where) {
  const ConfigValue current = key.get(RunConfig{});
  auto bad = [&]() {
    return ConfigError(fmt::format("{} ({}) must be a {}, e.g. {} = {}", key.dotted(), where,
                                   key.type_name(), key.name, format_config_value(current)));
  };
  switch (current.index()) {
    case 0:
      if (!v.is_integer()) throw bad();
      return static_cast<std::int64_t>(v.as_integer());
    case 1:
      if (v.is_integer()) return static_cast<double>(v.as_integer());
      if (!v.is_floating()) throw bad();
      return v.as_floating();
    case 2:
      if (!v.is_boolean()) throw bad();
      return v.as_boolean();
    default:
      // A number for a string key is its text: comm.bandwidth_mbps = 100, comm.round_kib = 32.
      if (v.is_integer()) return std::to_string(v.as_integer());
      if (v.is_floating()) return fmt::format("{}", v.as_floating());
      if (!v.is_string()) throw bad();
      return v.as_string().str;
  }
}

void apply_toml(RunConfig& config, const toml::value& root, const std::string& file) {
  for (const auto& [section, table] : root.as_table()) {
    if (!table.is_table()) {
      throw ConfigError(fmt::format(
          "'{}' in {} is a value at the top level; loco configs put every key in a section such as "
          "[model] or [train]",
          section, file));
    }
    for (const auto& [name, value] : table.as_table()) {
      const ConfigKey& key = require_key(section, name, "in " + file);
      key.set(config, toml_to_value(key, value, file));
    }
  }
}

[[noreturn]] void reject(const std::string& message) { throw ConfigError(message); }

// a·b for a size derived from the config; a product beyond 64 bits comes of a value far too large, a typo.
std::int64_t checked_product(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) {
    reject(fmt::format("{} = {} · {} does not fit in 64 bits: one of them is far too large", what, a, b));
  }
  return product;
}

// Tokens of one optimizer step, all replicas together.
std::int64_t tokens_per_step(const RunConfig& c) {
  return checked_product(c.global_batch(), c.data.seq_len, "the tokens per step, global batch · data.seq_len");
}

void validate_model(const ModelConfig& m, const DataConfig& d) {
  if (m.hidden_size <= 0 || m.num_hidden_layers <= 0 || m.num_attention_heads <= 0) {
    reject(fmt::format("model.hidden_size ({}), model.num_hidden_layers ({}) and "
                       "model.num_attention_heads ({}) must all be positive",
                       m.hidden_size, m.num_hidden_layers, m.num_attention_heads));
  }
  if (m.hidden_size % m.num_attention_heads != 0) {
    reject(fmt::format(
        "model.hidden_size ({}) is not divisible by model.num_attention_heads ({}): every head gets "
        "hidden_size/num_attention_heads channels. Choose a head count that divides the width "
        "(for example {}).",
        m.hidden_size, m.num_attention_heads, m.hidden_size % 64 == 0 ? m.hidden_size / 64 : 1));
  }
  if (m.head_dim() % 2 != 0) {
    reject(fmt::format("the head size model.hidden_size/model.num_attention_heads = {} is odd; rotary "
                       "embeddings rotate pairs of channels and need an even head size",
                       m.head_dim()));
  }
  if (m.num_key_value_heads <= 0 || m.num_attention_heads % m.num_key_value_heads != 0) {
    reject(fmt::format("model.num_key_value_heads ({}) must divide model.num_attention_heads ({}): each "
                       "key/value head serves a whole group of query heads",
                       m.num_key_value_heads, m.num_attention_heads));
  }
  if (m.intermediate_size <= 0) reject("model.intermediate_size must be positive (or 0 for the default)");
  if (m.vocab_size < 0) reject("model.vocab_size must be positive, or 0 to take it from the data");
  if (m.max_position_embeddings < d.seq_len) {
    reject(fmt::format("model.max_position_embeddings ({}) is shorter than data.seq_len ({}); raise it or "
                       "set it to 0 to follow data.seq_len",
                       m.max_position_embeddings, d.seq_len));
  }
  if (!(m.rope_theta > 0) || !(m.rms_norm_eps > 0) || !(m.initializer_range > 0)) {
    reject("model.rope_theta, model.rms_norm_eps and model.initializer_range must be positive");
  }
}

void validate_optim(const OptimConfig& o) {
  if (!(o.lr > 0)) reject(fmt::format("optim.lr ({}) must be positive", o.lr));
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1)) reject("optim.min_lr_ratio must lie in [0, 1]");
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) {
    reject("optim.beta1 and optim.beta2 must lie in [0, 1)");
  }
  if (!(o.eps > 0)) reject("optim.eps must be positive");
  if (!(o.weight_decay >= 0)) reject("optim.weight_decay must be 0 or positive");
  if (!(o.grad_clip >= 0)) reject("optim.grad_clip must be 0 (off) or positive");
  if (o.warmup_steps < 0) reject("optim.warmup_steps must be 0 or positive");
  if (!(o.decay_fraction > 0 && o.decay_fraction <= 1)) reject("optim.decay_fraction must lie in (0, 1]");
}

void validate_train(const TrainConfig& t, const DataConfig& d, std::int64_t replica_batch) {
  if (d.seq_len <= 0) reject("data.seq_len must be positive");
  if (d.dir.empty()) reject("data.dir is empty; point it at a directory written by `loco prepare`");
  if (t.steps <= 0) reject("set train.steps or train.tokens to a positive number: how long to train");
  if (t.batch_size <= 0) reject("train.batch_size must be positive");
  if (t.micro_batch_size <= 0 || replica_batch % t.micro_batch_size != 0) {
    reject(fmt::format("train.micro_batch_size ({}) must divide one replica's batch ({}): the batch is "
                       "split into equal micro-batches",
                       t.micro_batch_size, replica_batch));
  }
  if (t.eval_every < 0 || t.checkpoint_every < 0) reject("train.eval_every and train.checkpoint_every must be 0 or positive");
  if (t.eval_batches <= 0) reject("train.eval_batches must be positive");
  if (t.log_every <= 0) reject("train.log_every must be positive");
  if (t.out_dir.empty()) reject("train.out_dir is empty; name the run directory");
  if (t.threads < 0) reject("train.threads must be 0 (all cores) or positive");
}

// Every string key with choices holds one of them (config_keys.cpp lists them).
void validate_choices(const RunConfig& c) {
  for (const auto& key : config_keys()) {
    const ConfigValue value = key.get(c);
    const auto* text = std::get_if<std::string>(&value);
    if (text != nullptr && !key.allows(*text)) {
      reject(fmt::format("{} '{}' is unknown; choose {}", key.dotted(), *text, key.choice_list()));
    }
  }
}

void require_sync_every(const char* key, std::int64_t h) {
  if (h <= 0) reject(fmt::format("{} ({}) must be positive: the inner steps between synchronisations", key, h));
}

// Note "elastic-data" (elastic/round_layout.h): members come and go, so each trains on its own batch.
void validate_elastic(const RunConfig& c) {
  const Algorithm algorithm = algorithm_named(c.dist.algorithm);
  if (algorithm == Algorithm::none) {
    reject(fmt::format("dist.elastic = true needs an algorithm that exchanges (diloco, localsgd, streaming, noloco or "
                       "ddp), not {}",
                       c.dist.algorithm));
  }
  if (algorithm == Algorithm::streaming) {
    // Note "elastic-overlap" (elastic/quorum_membership.h): one exchange in flight at most, none at a
    // synchronisation point.
    const StreamingConfig& s = c.streaming;
    if (s.overlap_auto) {
      reject("dist.elastic = true with streaming.overlap_auto = true: an elastic member keeps one exchange in flight "
             "at most, so tau cannot grow with the exchange there; set streaming.overlap instead");
    }
    const std::int64_t spacing = s.sync_every / (s.fragments + (s.embeddings_fragment ? 1 : 0));
    if (s.overlap > 0 && s.overlap >= spacing) {
      reject(fmt::format("dist.elastic = true with streaming needs streaming.overlap ({}) below the spacing of its "
                         "fragments' synchronisations, streaming.sync_every / fragments = {}: an elastic member has "
                         "one exchange in flight at most. Lower streaming.overlap, or raise streaming.sync_every",
                         s.overlap, spacing));
    }
  }
  if (algorithm == Algorithm::ddp) {
    // Elastic data parallel exchanges the whole gradient once the step's quorum is known (elastic/elastic_ddp.h):
    // the keys that shape a static run's buckets would be accepted and never read.
    const DdpConfig defaults;
    if (c.ddp.bucket_mb != defaults.bucket_mb || c.ddp.first_bucket_mb != defaults.first_bucket_mb ||
        c.ddp.overlap != defaults.overlap) {
      reject(fmt::format("dist.elastic = true exchanges data parallel's gradients in one piece after backward, once "
                         "each step's quorum is known: ddp.bucket_mb, ddp.first_bucket_mb and ddp.overlap shape the "
                         "buckets of a run without dist.elastic and do not apply. Leave them at their defaults "
                         "({}, {}, {})",
                         defaults.bucket_mb, defaults.first_bucket_mb, defaults.overlap));
    }
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

void validate_dist(const RunConfig& c) {
  const DistConfig& d = c.dist;
  const Algorithm algorithm = algorithm_named(d.algorithm);
  if (d.replicas < 1) reject(fmt::format("dist.replicas ({}) must be at least 1", d.replicas));
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
  require_sync_every("diloco.sync_every", c.diloco.sync_every);
  require_sync_every("streaming.sync_every", c.streaming.sync_every);
  require_sync_every("noloco.sync_every", c.noloco.sync_every);
  require_sync_every("localsgd.sync_every", c.localsgd.sync_every);
  if (!(c.diloco.outer_lr > 0) || !(c.streaming.outer_lr > 0)) reject("the outer learning rates must be positive");
  if (!(c.diloco.outer_momentum >= 0 && c.diloco.outer_momentum < 1) ||
      !(c.streaming.outer_momentum >= 0 && c.streaming.outer_momentum < 1)) {
    reject("diloco.outer_momentum and streaming.outer_momentum must lie in [0, 1)");
  }
  if (!(c.diloco.drop_rate >= 0 && c.diloco.drop_rate < 1)) reject("diloco.drop_rate must lie in [0, 1)");
  const StreamingConfig& s = c.streaming;
  if (s.fragments < 1 || (algorithm == Algorithm::streaming && s.fragments > c.model.num_hidden_layers)) {
    reject(fmt::format("streaming.fragments ({}) must lie in [1, model.num_hidden_layers = {}]: every fragment "
                       "holds at least one transformer block",
                       s.fragments, c.model.num_hidden_layers));
  }
  if (s.overlap < 0 || s.overlap >= s.sync_every) {
    reject(fmt::format("streaming.overlap ({}) must lie in [0, streaming.sync_every = {}): a fragment's exchange "
                       "must land before its next one starts",
                       s.overlap, s.sync_every));
  }
  if (s.overlap_auto && s.sync_every < 2) {
    reject(fmt::format("streaming.overlap_auto = true needs streaming.sync_every of 2 or more (it is {}): tau lies in "
                       "[1, streaming.sync_every - 1]",
                       s.sync_every));
  }
  if (!(s.mix >= 0 && s.mix <= 1)) reject("streaming.mix must lie in [0, 1]");
  if (c.comm.block_size <= 0) reject("comm.block_size must be positive");
  if (!(c.comm.timeout_s > 0)) reject("comm.timeout_s must be positive");
  if (c.comm.round_kib != "auto" && c.comm.round_kib != "off") {
    const auto kib = parse_whole_number(c.comm.round_kib);
    if (!kib || *kib < 0) {
      reject(fmt::format("comm.round_kib '{}' is not a round size: give auto (sized from the link), off (one round) "
                         "or a size in KiB per peer and round, e.g. 32",
                         c.comm.round_kib));
    }
  }
  try {
    const int ranks = static_cast<int>(d.replicas);
    parse_per_rank_values(c.comm.bandwidth_mbps, "bandwidth (Mbit/s)", ranks);
    parse_per_rank_values(c.comm.latency_ms, "latency (ms)", ranks);
  } catch (const Error& e) {
    reject(fmt::format("comm.bandwidth_mbps / comm.latency_ms: {}", e.what()));
  }
  const NolocoConfig& n = c.noloco;
  if (!(n.momentum >= 0 && n.momentum < 1) || !(n.beta > 0) || !(n.gamma > 0)) {
    reject("noloco.momentum must lie in [0, 1); noloco.beta and noloco.gamma must be positive");
  }
  if (c.localsgd.qsr_alpha < 0) reject("localsgd.qsr_alpha must be 0 (fixed H) or positive");
  const bool outer_step = algorithm == Algorithm::diloco || algorithm == Algorithm::localsgd ||
                          algorithm == Algorithm::streaming;
  if (d.aggregation != "mean" && !outer_step) {
    reject(fmt::format("dist.aggregation = \"{}\" combines the pseudo-gradients of an outer step: it needs "
                       "dist.algorithm diloco, localsgd or streaming, not {}",
                       d.aggregation, d.algorithm));
  }
  if (d.trim < 1) reject(fmt::format("dist.trim ({}) must be at least 1", d.trim));
  if (d.clip_iterations < 1) reject(fmt::format("dist.clip_iterations ({}) must be at least 1", d.clip_iterations));
  if (!(d.clip_radius > 0) || !std::isfinite(d.clip_radius)) {
    reject(fmt::format("dist.clip_radius ({}) must be a positive number", d.clip_radius));
  }
  if (!d.adversary.empty()) {
    parse_adversary(d.adversary, d.replicas);
    if (!outer_step) {
      reject("dist.adversary simulates a bad replica in the outer step of diloco, localsgd or streaming");
    }
  }
  if (d.elastic) validate_elastic(c);
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

}  // namespace

std::int64_t RunConfig::replica_batch() const {
  return dist.batch == "split" ? train.batch_size / std::max<std::int64_t>(1, dist.replicas) : train.batch_size;
}

std::int64_t RunConfig::global_batch() const {
  return dist.batch == "split" ? train.batch_size
                               : checked_product(train.batch_size, std::max<std::int64_t>(1, dist.replicas),
                                                 "the global batch, train.batch_size · dist.replicas");
}

ExchangeConfig RunConfig::exchange() const {
  const bool streaming_run = algorithm_named(dist.algorithm) == Algorithm::streaming;
  return {streaming_run ? streaming.codec : comm.codec, comm.block_size, dist.check_sync,
          {dist.aggregation, dist.trim, dist.clip_iterations, dist.clip_radius},
          parse_adversary(dist.adversary, dist.replicas)};
}

void apply_override(RunConfig& config, const std::string& assignment) {
  auto eq = assignment.find('=');
  auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    throw ConfigError(fmt::format("override '{}' is not of the form section.key=value (for example "
                                  "--set optim.lr=3e-4)",
                                  assignment));
  }
  std::string section = assignment.substr(0, dot);
  std::string name = assignment.substr(dot + 1, eq - dot - 1);
  const ConfigKey& key = require_key(section, name, "in --set " + assignment);
  key.set(config, parse_text_value(key, assignment.substr(eq + 1)));
}

void resolve_derived(RunConfig& c, std::int64_t world_size) {
  ModelConfig& m = c.model;
  if (m.intermediate_size == 0) {
    m.intermediate_size = 32 * ((checked_product(8, m.hidden_size, "8 · model.hidden_size") / 3 + 31) / 32);
  }
  if (m.num_key_value_heads == 0) m.num_key_value_heads = m.num_attention_heads;
  if (m.max_position_embeddings == 0) m.max_position_embeddings = c.data.seq_len;
  if (c.dist.replicas == 0) c.dist.replicas = c.dist.backend == "local" ? 1 : world_size;
  TrainConfig& t = c.train;
  if (t.micro_batch_size == 0) t.micro_batch_size = c.replica_batch();
  if (t.tokens > 0) {
    std::int64_t per_step = tokens_per_step(c);
    std::int64_t steps = per_step > 0 ? (t.tokens - 1) / per_step + 1 : 0;  // rounded up; tokens > 0
    if (t.steps != 0 && t.steps != steps) {
      throw ConfigError(fmt::format(
          "train.steps ({}) and train.tokens ({}) disagree (the token budget means {} steps at "
          "global batch·seq_len = {}); set only one of them",
          t.steps, t.tokens, steps, per_step));
    }
    t.steps = steps;
  }
}

void validate(const RunConfig& c) {
  validate_choices(c);
  validate_dist(c);
  validate_train(c.train, c.data, c.replica_batch());
  tokens_per_step(c);  // the trainer multiplies these sizes: ConfigError when they overflow
  validate_model(c.model, c.data);
  validate_optim(c.optim);
}

RunConfig read_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  // Checked first for what toml11 cannot be given safely (toml_text.h).
  const std::string text = read_toml_text(file, "config file");
  toml::value root;
  try {
    std::istringstream stream(text);
    root = toml::parse(stream, file.string());
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("cannot parse {} as TOML: {}", file.string(), e.what()));
  }
  RunConfig config;
  apply_toml(config, root, file.string());
  for (const auto& assignment : overrides) apply_override(config, assignment);
  return config;
}

RunConfig load_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                          std::int64_t world_size) {
  RunConfig config = read_run_config(file, overrides);
  complete_run_config(config, world_size);
  return config;
}

void complete_run_config(RunConfig& config, std::int64_t world_size) {
  resolve_derived(config, world_size);
  validate(config);
}

RunConfig read_config_for_planning(const std::filesystem::path& file) {
  RunConfig config = read_run_config(file, {});
  resolve_derived(config);
  try {
    validate_model(config.model, config.data);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", file.string(), e.what()));
  }
  return config;
}

std::string to_toml(const RunConfig& config) {
  std::string out;
  std::string section;
  for (const auto& key : config_keys()) {
    if (key.section != section) {
      section = key.section;
      out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", section);
    }
    out += fmt::format("{} = {}\n", key.name, format_config_value(key.get(config)));
  }
  return out;
}

nlohmann::json to_json(const RunConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& key : config_keys()) {
    std::visit([&](const auto& v) { out[key.section][key.name] = v; }, key.get(config));
  }
  return out;
}

RunConfig from_json(const nlohmann::json& json) {
  RunConfig config;
  for (const auto& [section, table] : json.items()) {
    for (const auto& [name, value] : table.items()) {
      const ConfigKey& key = require_key(section, name, "in a checkpoint's state.json");
      switch (key.get(config).index()) {
        case 0: key.set(config, value.get<std::int64_t>()); break;
        case 1: key.set(config, value.get<double>()); break;
        case 2: key.set(config, value.get<bool>()); break;
        default: key.set(config, value.get<std::string>()); break;
      }
    }
  }
  return config;
}

std::string describe_config_keys() {
  std::vector<std::string> sections;
  for (const auto& key : config_keys()) {
    if (sections.empty() || sections.back() != "[" + key.section + "]") sections.push_back("[" + key.section + "]");
  }
  std::string out = fmt::format("config keys (TOML sections {}; override with --set section.key=value):\n",
                                fmt::join(sections, " "));
  const RunConfig defaults;
  for (const auto& key : config_keys()) {
    out += fmt::format("  {:<30} {:<8} default {:<14} {}\n", key.dotted(), key.type_name(),
                       format_config_value(key.get(defaults)), key.description());
  }
  return out;
}

}  // namespace loco
