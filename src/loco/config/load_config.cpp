#include "loco/config/load_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <toml.hpp>
#include <utility>
#include <vector>

#include "loco/config/adversary.h"
#include "loco/config/algorithms.h"
#include "loco/config/config_keys.h"
#include "loco/config/dist_checks.h"
#include "loco/config/strategy_checks.h"
#include "loco/config/toml_text.h"
#include "loco/util/error.h"
#include "loco/util/utf8.h"

namespace loco {

namespace {

const ConfigKey& require_key(const std::string& section, const std::string& name, const std::string& where) {
  if (const ConfigKey* key = find_config_key(section, name)) return *key;
  std::string dotted = section + "." + name;
  throw ConfigError(fmt::format(
      "unknown config key '{}' ({}). {}Run `loco train --help-config` for the list of keys.", dotted,
      where, suggest_config_key(dotted)));
}

// A float as a config writes it: the whole text a number, no leading blank, finite, in decimal (strtod also
// reads 0x1p-8, which TOML does not allow and `--set` took). Otherwise throws bad("a number"), bad("a finite
// number") or bad("a decimal number"), bad giving the ConfigError that names the key.
template <typename Bad>
double parse_float_text(const std::string& text, const Bad& bad) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0]))) throw bad("a number");
  if (!std::isfinite(value)) throw bad("a finite number");
  if (text.find_first_not_of("+-.0123456789eE") != std::string::npos) throw bad("a decimal number");
  return value;
}

// Note "one-number-parser": a number for a config key is read from its text, whether the text comes from
// `--set` or from a TOML file (the literal as written, underscores between digits removed), so the same
// value is refused the same way everywhere: toml11 itself turns 1e999 into inf and saturates
// 99999999999999999999 to 2^63 - 1 without a word. Integers may be written in base 16, 8 or 2 with TOML's
// prefixes (0x, 0o, 0b); floats must be finite.
ConfigValue parse_text_value(const ConfigKey& key, const std::string& text, const std::string& where) {
  const ConfigValue current = key.get(RunConfig{});
  auto bad = [&](const char* expected) {
    return ConfigError(fmt::format("'{}' for {} ({}) is not {}; give it like {}={}", text, key.dotted(), where,
                                   expected, key.dotted(), format_config_value(current)));
  };
  switch (current.index()) {
    case 0: {  // integer
      const bool prefixed = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'o' || text[1] == 'b');
      const int base = !prefixed ? 10 : text[1] == 'x' ? 16 : text[1] == 'o' ? 8 : 2;
      const char* begin = text.c_str() + (prefixed ? 2 : 0);
      // strtoll would skip leading blanks, and take a sign after a base prefix: neither is a number here.
      if (*begin == '\0' || std::isspace(static_cast<unsigned char>(*begin)) ||
          (prefixed && (*begin == '-' || *begin == '+'))) {
        throw bad("an integer");
      }
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(begin, &end, base);
      if (*end != '\0') throw bad("an integer");
      if (errno == ERANGE) throw bad("an integer of at most 64 bits");
      return static_cast<std::int64_t>(v);
    }
    case 1:  // float
      return parse_float_text(text, bad);
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

// A TOML number's literal as the file writes it, without the underscores TOML allows between digits.
std::string toml_number_text(const toml::value& v) {
  const toml::source_location where = v.location();
  std::string text = where.line_str().substr(where.column() - 1, where.region());
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  return text;
}

ConfigValue toml_to_value(const ConfigKey& key, const toml::value& v, const std::string& where) {
  const ConfigValue current = key.get(RunConfig{});
  auto bad = [&]() {
    const std::string type = key.type_name();
    return ConfigError(fmt::format("{} ({}) must be {} {}, e.g. {} = {}", key.dotted(), where,
                                   type == "integer" ? "an" : "a", type, key.name, format_config_value(current)));
  };
  switch (current.index()) {
    case 0:
      if (!v.is_integer()) throw bad();
      return parse_text_value(key, toml_number_text(v), where);
    case 1:
      if (!v.is_integer() && !v.is_floating()) throw bad();
      return parse_text_value(key, toml_number_text(v), where);
    case 2:
      if (!v.is_boolean()) throw bad();
      return v.as_boolean();
    default:
      // A number for a string key is its text: comm.bandwidth_mbps = 100, comm.round_kib = 32.
      if (v.is_integer()) return std::to_string(v.as_integer());
      if (v.is_floating()) return toml_number_text(v);  // as written: 1e999 stays out of range, not "inf"
      if (!v.is_string()) throw bad();
      // A NUL would end the text wherever it is used as a C string: a path, or this message.
      if (v.as_string().str.find('\0') != std::string::npos) {
        throw ConfigError(fmt::format("{} ({}) holds a NUL character (\\u0000); remove it", key.dotted(), where));
      }
      return v.as_string().str;
  }
}

void apply_toml(RunConfig& config, const toml::value& root, const std::string& file) {
  for (const auto& [section, table] : root.as_table()) {
    // [[train]] is an array of tables: said as such (it was "a value at the top level").
    const bool array_of_tables = table.is_array() && !table.as_array().empty() && table.as_array().front().is_table();
    if (array_of_tables) {
      throw ConfigError(
          fmt::format("[[{0}]] in {1} is an array of tables (double brackets); a loco config has one "
                      "table per section: write [{0}]",
                      section, file));
    }
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

// Bounds on a model's size that no configuration meant for a machine reaches: a value beyond them is a
// typo or an edited file, refused before it becomes an allocation.
constexpr std::int64_t kMostParameters = std::int64_t{1} << 43;  // 8.8 trillion
constexpr std::int64_t kLongestSequence = std::int64_t{1} << 24;  // 16.8M positions

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
  // Rotary embeddings rotate pairs of channels: a head's size hidden_size/num_attention_heads is whole and even.
  if (m.hidden_size % 2 != 0) {
    reject(
        fmt::format("model.hidden_size ({}) is odd; every head's size must be even (rotary embeddings rotate "
                    "pairs of channels), so the width must be: choose an even one, for example {}",
                    m.hidden_size, m.hidden_size + 1));
  }
  if (m.hidden_size % m.num_attention_heads != 0 || m.head_dim() % 2 != 0) {
    // An example neither this check nor the next refuses: the most heads up to the number given that leave each
    // an even size and that the key/value heads divide, else the most that leave an even size (1 does: the width
    // is even) with as many key/value heads as divide both.
    std::int64_t heads = 0, even = 0;
    for (std::int64_t h = std::min(m.num_attention_heads, m.hidden_size / 2); h >= 1 && heads == 0; --h) {
      if (m.hidden_size % h != 0 || (m.hidden_size / h) % 2 != 0) continue;
      if (even == 0) even = h;
      if (m.num_key_value_heads > 0 && h % m.num_key_value_heads == 0) heads = h;
    }
    if (heads == 0) heads = even;
    const std::int64_t kv_heads = m.num_key_value_heads > 0 ? std::gcd(heads, m.num_key_value_heads) : heads;
    const std::string example = kv_heads == m.num_key_value_heads
                                    ? fmt::format("{}", heads)
                                    : fmt::format("{}, with model.num_key_value_heads = {}", heads, kv_heads);
    reject(fmt::format(
        "{}: every head gets hidden_size/num_attention_heads channels, an even number (rotary embeddings rotate "
        "pairs of them). Choose a head count that gives that (for example {}).",
        m.hidden_size % m.num_attention_heads != 0
            ? fmt::format("model.hidden_size ({}) is not divisible by model.num_attention_heads ({})", m.hidden_size,
                          m.num_attention_heads)
            : fmt::format("the head size model.hidden_size/model.num_attention_heads = {}/{} = {} is odd",
                          m.hidden_size, m.num_attention_heads, m.head_dim()),
        example));
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
  // Above 1 either makes a model that cannot learn, without a NaN to say so: weights of standard deviation 2^31
  // square past float32 in the norms, which then give 0 and every logit the same (loss ln V at every step).
  if (m.initializer_range > 1) {
    reject(
        fmt::format("model.initializer_range ({}) must be at most 1: it is the standard deviation of the initial "
                    "weights (0.02 by default); larger, the model cannot learn",
                    m.initializer_range));
  }
  if (m.rms_norm_eps > 1) {
    reject(
        fmt::format("model.rms_norm_eps ({}) must be at most 1: it guards the norms against dividing by zero "
                    "(1e-5 by default); larger, the model cannot learn",
                    m.rms_norm_eps));
  }
  if (m.max_position_embeddings > kLongestSequence) {
    reject(fmt::format("model.max_position_embeddings ({}) and data.seq_len are at most {}; a longer sequence "
                       "is a typo",
                       m.max_position_embeddings, kLongestSequence));
  }
  // Attention and MLP weights per layer, embeddings and head: an upper bound of the parameters, whose
  // products checked_product refuses before they overflow (and each term is bounded before a sum).
  const std::int64_t attention =
      checked_product(4, checked_product(m.hidden_size, m.hidden_size, "model.hidden_size²"), "the attention weights");
  const std::int64_t mlp =
      checked_product(3, checked_product(m.hidden_size, m.intermediate_size, "the MLP weights"), "the MLP weights");
  const std::int64_t embeddings =
      checked_product(2, checked_product(std::max<std::int64_t>(m.vocab_size, 1), m.hidden_size, "the embeddings"),
                      "the embeddings and head");
  const std::int64_t layers =
      std::max({attention, mlp, embeddings}) > kMostParameters
          ? kMostParameters + 1
          : checked_product(m.num_hidden_layers, attention + mlp, "the parameters of every layer");
  if (layers > kMostParameters - std::min(embeddings, kMostParameters)) {
    reject(fmt::format("the model has more than {} parameters (model.num_hidden_layers {}, model.hidden_size {}, "
                       "model.intermediate_size {}, model.vocab_size {}); no machine holds it, so one of them is a "
                       "typo",
                       kMostParameters, m.num_hidden_layers, m.hidden_size, m.intermediate_size, m.vocab_size));
  }
}

void validate_optim(const OptimConfig& o) {
  if (!(o.lr > 0)) reject(fmt::format("optim.lr ({}) must be positive", o.lr));
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1)) reject("optim.min_lr_ratio must lie in [0, 1]");
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) {
    reject("optim.beta1 and optim.beta2 must lie in [0, 1)");
  }
  if (!(o.eps > 0)) reject("optim.eps must be positive");
  if (!(o.resolved_weight_decay >= 0 && std::isfinite(o.resolved_weight_decay))) {
    reject("optim.weight_decay must be 0 or positive");
  }
  // AdamW multiplies the weights by 1 − lr·weight_decay each step: at 1 or more it zeroes or flips them.
  if (o.lr * o.resolved_weight_decay >= 1) {
    reject(
        fmt::format("optim.lr · optim.weight_decay = {} · {} is 1 or more, and AdamW multiplies the weights by "
                    "1 − lr · weight_decay at every step, which zeroes or flips them; lower optim.lr (1e-3 to "
                    "4e-3 is common) or optim.weight_decay (0.1 is common) so that their product is below 1",
                    o.lr, o.resolved_weight_decay));
  }
  if (!(o.grad_clip >= 0)) reject("optim.grad_clip must be 0 (off) or positive");
  if (o.warmup_steps < 0) reject("optim.warmup_steps must be 0 or positive");
  if (!(o.decay_fraction > 0 && o.decay_fraction <= 1)) reject("optim.decay_fraction must lie in (0, 1]");
}

// `batch_layout`: how one replica's batch follows from train.batch_size and dist.* (named in the micro-batch
// error: the replica count is the likelier change, a resume with another dist.replicas say).
void validate_train(const TrainConfig& t, const DataConfig& d, std::int64_t replica_batch,
                    const std::string& batch_layout) {
  if (d.seq_len <= 0) reject("data.seq_len must be positive");
  if (d.dir.empty()) reject("data.dir is empty; point it at a directory written by `loco prepare`");
  if (t.tokens < 0) reject(fmt::format("train.tokens ({}) must be 0 (use train.steps) or positive", t.tokens));
  if (t.steps <= 0) reject("set train.steps or train.tokens to a positive number: how long to train");
  if (t.batch_size <= 0) reject("train.batch_size must be positive");
  if (t.micro_batch_size <= 0 || replica_batch % t.micro_batch_size != 0) {
    reject(fmt::format("train.micro_batch_size ({}) must divide one replica's batch ({}{}): the batch is "
                       "split into equal micro-batches",
                       t.micro_batch_size, replica_batch, batch_layout));
  }
  if (t.eval_every < 0 || t.checkpoint_every < 0) reject("train.eval_every and train.checkpoint_every must be 0 or positive");
  if (t.stop_check_every < 0) reject("train.stop_check_every must be 0 (check only at synchronisations) or positive");
  if (t.keep_checkpoints < 0) reject("train.keep_checkpoints must be 0 (keep every checkpoint) or positive");
  if (t.eval_batches <= 0) reject("train.eval_batches must be positive");
  // The evaluation reads eval_batches · batch_size sequences (before: beyond 64 bits the count wrapped, the
  // evaluation read nothing and the run said its data had no validation split).
  checked_product(t.eval_batches, t.batch_size,
                  "the sequences of an evaluation, train.eval_batches · train.batch_size");
  if (t.log_every <= 0) reject("train.log_every must be positive");
  if (t.out_dir.empty()) reject("train.out_dir is empty; name the run directory");
  if (t.threads < 0) reject("train.threads must be 0 (chosen from the device) or positive");
  if (t.threads > kMostThreads) {
    reject(fmt::format("train.threads = {} is more threads than any machine has cores; give at most {} (0 chooses "
                       "from the device)",
                       t.threads, kMostThreads));
  }
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

// Every number is finite and within float32's range, however the config was built (a file, --set, a
// checkpoint's state.json): rates, clips and thetas become float32 tensors, where a larger value overflows
// (libtorch's error names no key), and a smaller one than its least normal number becomes 0 or loses its
// precision (optim.lr = 1e-50 trained nothing, silently). No setting means anything that large or small.
void validate_float32(const std::string& dotted, double number) {
  if (!std::isfinite(number)) reject(fmt::format("{} = {} is not a finite number; give a finite value", dotted, number));
  if (std::abs(number) > std::numeric_limits<float>::max()) {
    reject(fmt::format("{} = {} is beyond the range of float32 (±{:.3g}), in which loco computes; give a smaller "
                       "value",
                       dotted, number, std::numeric_limits<float>::max()));
  }
  if (number != 0 && std::abs(number) < std::numeric_limits<float>::min()) {
    reject(fmt::format("{} = {:g} is below the smallest float32 number ({:.3g}), in which loco computes: there "
                       "it is 0 or keeps no precision; give a larger value (or 0, where the key allows it)",
                       dotted, number, std::numeric_limits<float>::min()));
  }
}

void validate_finite(const RunConfig& c) {
  for (const auto& key : config_keys()) {
    const ConfigValue value = key.get(c);
    if (const auto* number = std::get_if<double>(&value)) validate_float32(key.dotted(), *number);
  }
  // A key given as text ("1/T" or a number), whose number is the resolved one.
  validate_float32("optim.weight_decay", c.optim.resolved_weight_decay);
}

// optim.weight_decay as written: a number, or "1/T", one over the optimizer steps, as the DiLoCo
// scaling-law recipe sets it (docs/algorithm-reference.md §3). AdamW multiplies it by the lr, as PyTorch does.
double resolve_weight_decay(const std::string& text, std::int64_t steps) {
  if (text == "1/T") return steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;  // steps <= 0 is rejected later
  const auto bad = [&](const char* expected) {
    return ConfigError(fmt::format("optim.weight_decay '{}' is not {}; give it like optim.weight_decay = 0.1, or "
                                   "optim.weight_decay = \"1/T\" for one over the run's optimizer steps",
                                   text, expected));
  };
  const double value = parse_float_text(text, bad);
  if (value < 0) throw bad("0 or positive");
  return value;
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
  // As in a config file (read_toml): a run's config is written as TOML and JSON, which hold UTF-8 only, so a
  // value that is not would fail when the first checkpoint is written, after the training it holds.
  if (const auto bad = first_invalid_utf8(assignment)) {
    throw ConfigError(fmt::format("--set {}: byte {} is not UTF-8 (a path in another encoding?); loco's configs, "
                                  "checkpoints and metrics hold UTF-8 only. Rename the file or directory",
                                  assignment.substr(0, *bad) + "…", *bad + 1));
  }
  std::string section = assignment.substr(0, dot);
  std::string name = assignment.substr(dot + 1, eq - dot - 1);
  const ConfigKey& key = require_key(section, name, "in --set " + assignment);
  key.set(config, parse_text_value(key, assignment.substr(eq + 1), "in --set " + assignment));
}

void resolve_derived(RunConfig& c, std::int64_t world_size) {
  ModelConfig& m = c.model;
  if (m.intermediate_size == 0) {
    m.intermediate_size = 32 * ((checked_product(8, m.hidden_size, "8 · model.hidden_size") / 3 + 31) / 32);
  }
  if (m.num_key_value_heads == 0) m.num_key_value_heads = m.num_attention_heads;
  if (m.max_position_embeddings == 0) m.max_position_embeddings = c.data.seq_len;
  // Pipeline replicas of dist.stages ranks each: WORLD_SIZE / stages of them (train_rank refuses a remainder).
  if (c.dist.replicas == 0) {
    const std::int64_t stages = std::max<std::int64_t>(c.dist.stages, 1);
    c.dist.replicas = c.dist.backend == "local" ? 1 : std::max<std::int64_t>(world_size / stages, 1);
  }
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
  c.optim.resolved_weight_decay = resolve_weight_decay(c.optim.weight_decay, t.steps);
}

void validate(const RunConfig& c) {
  validate_finite(c);
  validate_choices(c);
  check_dist_section(c);
  check_strategy_sections(c);
  check_comm_section(c);
  const std::string batch_layout =
      c.dist.replicas > 1 && c.dist.batch == "split"
          ? fmt::format(": train.batch_size {} over dist.replicas {}", c.train.batch_size, c.dist.replicas)
          : "";
  validate_train(c.train, c.data, c.replica_batch(), batch_layout);
  // Each replica and stage writes its own step_N: a run stopped while they write one holds parts of two steps, and
  // only the step before is whole in every part (note "run-checkpoints").
  if (c.train.keep_checkpoints == 1 && (c.dist.algorithm != "none" || c.dist.stages > 1)) {
    reject(
        fmt::format("train.keep_checkpoints = 1 with {}: each replica and stage writes its own checkpoints, and "
                    "one stopped while they write leaves the step before as the only one whole in every part. "
                    "Keep 2 or more",
                    c.dist.stages > 1 ? "pipeline stages" : "dist.algorithm = \"" + c.dist.algorithm + "\""));
  }
  tokens_per_step(c);  // the trainer multiplies these sizes: ConfigError when they overflow
  validate_model(c.model, c.data);
  validate_optim(c.optim);
}

RunConfig read_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  // Checked for what toml11 cannot be given safely before it parses (toml_text.h).
  const toml::value root = parse_toml_file(file, "config file");
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

nlohmann::json shared_settings_json(const RunConfig& config) {
  static const std::set<std::string> kRankLocal = {"train.out_dir", "data.dir", "train.threads", "train.device"};
  nlohmann::json out = nlohmann::json::object();
  for (const auto& key : config_keys()) {
    if (kRankLocal.count(fmt::format("{}.{}", key.section, key.name)) > 0) continue;
    std::visit([&](const auto& v) { out[key.section][key.name] = v; }, key.get(config));
  }
  return out;
}

nlohmann::json member_settings_json(const RunConfig& config) {
  static const std::vector<std::pair<const char*, const char*>> kMemberLocal = {
      {"train", "eval_every"},       {"train", "eval_batches"},     {"train", "checkpoint_every"},
      {"train", "keep_checkpoints"}, {"train", "stop_check_every"}, {"train", "log_every"},
      {"train", "micro_batch_size"}, {"train", "autocast"},         {"train", "cuda_graphs"},
      {"comm", "timeout_s"}};
  nlohmann::json out = shared_settings_json(config);
  for (const auto& [section, name] : kMemberLocal) out.at(section).erase(name);
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
