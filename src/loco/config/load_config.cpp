#include "loco/config/load_config.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <toml.hpp>

#include "loco/config/config_keys.h"
#include "loco/util/error.h"

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
  if (o.schedule != "cosine" && o.schedule != "linear" && o.schedule != "constant" && o.schedule != "wsd") {
    reject(fmt::format("optim.schedule '{}' is unknown; choose cosine, linear, constant or wsd", o.schedule));
  }
  if (o.warmup_steps < 0) reject("optim.warmup_steps must be 0 or positive");
  if (!(o.decay_fraction > 0 && o.decay_fraction <= 1)) reject("optim.decay_fraction must lie in (0, 1]");
}

void validate_train(const TrainConfig& t, const DataConfig& d) {
  if (d.seq_len <= 0) reject("data.seq_len must be positive");
  if (d.dir.empty()) reject("data.dir is empty; point it at a directory written by `loco prepare`");
  if (t.steps <= 0) reject("set train.steps or train.tokens to a positive number: how long to train");
  if (t.batch_size <= 0) reject("train.batch_size must be positive");
  if (t.micro_batch_size <= 0 || t.batch_size % t.micro_batch_size != 0) {
    reject(fmt::format("train.micro_batch_size ({}) must divide train.batch_size ({}): the batch is "
                       "split into equal micro-batches",
                       t.micro_batch_size, t.batch_size));
  }
  if (t.eval_every < 0 || t.checkpoint_every < 0) reject("train.eval_every and train.checkpoint_every must be 0 or positive");
  if (t.eval_batches <= 0) reject("train.eval_batches must be positive");
  if (t.log_every <= 0) reject("train.log_every must be positive");
  if (t.out_dir.empty()) reject("train.out_dir is empty; name the run directory");
  if (t.device != "cpu" && t.device != "cuda" && t.device != "auto") {
    reject(fmt::format("train.device '{}' is unknown; choose cpu, cuda or auto", t.device));
  }
  if (t.autocast != "none" && t.autocast != "bf16") {
    reject(fmt::format("train.autocast '{}' is unknown; choose none or bf16", t.autocast));
  }
  if (t.threads < 0) reject("train.threads must be 0 (all cores) or positive");
}

}  // namespace

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

void resolve_derived(RunConfig& c) {
  ModelConfig& m = c.model;
  if (m.intermediate_size == 0) {
    m.intermediate_size = 32 * ((8 * m.hidden_size / 3 + 31) / 32);
  }
  if (m.num_key_value_heads == 0) m.num_key_value_heads = m.num_attention_heads;
  if (m.max_position_embeddings == 0) m.max_position_embeddings = c.data.seq_len;
  TrainConfig& t = c.train;
  if (t.micro_batch_size == 0) t.micro_batch_size = t.batch_size;
  if (t.tokens > 0) {
    std::int64_t per_step = t.batch_size * c.data.seq_len;
    std::int64_t steps = per_step > 0 ? (t.tokens + per_step - 1) / per_step : 0;
    if (t.steps != 0 && t.steps != steps) {
      throw ConfigError(fmt::format(
          "train.steps ({}) and train.tokens ({}) disagree (the token budget means {} steps at "
          "batch_size·seq_len = {}); set only one of them",
          t.steps, t.tokens, steps, per_step));
    }
    t.steps = steps;
  }
}

void validate(const RunConfig& c) {
  validate_train(c.train, c.data);
  validate_model(c.model, c.data);
  validate_optim(c.optim);
}

RunConfig load_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  if (!std::filesystem::exists(file)) {
    throw ConfigError(fmt::format("config file '{}' does not exist; pass an existing TOML file (see "
                                  "configs/ for presets)",
                                  file.string()));
  }
  toml::value root;
  try {
    root = toml::parse(file.string());
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("cannot parse {} as TOML: {}", file.string(), e.what()));
  }
  RunConfig config;
  apply_toml(config, root, file.string());
  for (const auto& assignment : overrides) apply_override(config, assignment);
  resolve_derived(config);
  validate(config);
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
  std::string out;
  const RunConfig defaults;
  for (const auto& key : config_keys()) {
    out += fmt::format("  {:<30} {:<8} default {:<14} {}\n", key.dotted(), key.type_name(),
                       format_config_value(key.get(defaults)), key.help);
  }
  return out;
}

}  // namespace loco
