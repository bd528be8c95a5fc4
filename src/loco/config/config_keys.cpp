#include "loco/config/config_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "loco/config/algorithms.h"

namespace loco {

namespace {

// Binds a key to `RunConfig::*section.*field`; the field's C++ type decides the key's type.
template <typename Section, typename Field>
ConfigKey bind(const char* section, const char* name, Section RunConfig::*sec, Field Section::*field,
               const char* help, std::vector<ConfigChoice> choices = {}) {
  ConfigKey key;
  key.section = section;
  key.name = name;
  key.help = help;
  key.choices = std::move(choices);
  key.get = [sec, field](const RunConfig& c) -> ConfigValue { return (c.*sec).*field; };
  key.set = [sec, field](RunConfig& c, const ConfigValue& v) { (c.*sec).*field = std::get<Field>(v); };
  return key;
}

std::vector<ConfigChoice> algorithm_choices() {
  std::vector<ConfigChoice> choices;
  for (const auto& entry : algorithm_registry()) choices.push_back({entry.name, entry.summary});
  return choices;
}

// The codecs of comm/codecs (a unit test checks that comm builds exactly these).
std::vector<ConfigChoice> codec_choices() { return {{"fp32", ""}, {"bf16", ""}, {"int8", ""}, {"fp4", ""}, {"int4", ""}}; }

std::vector<ConfigKey> make_keys() {
  using R = RunConfig;
  using M = ModelConfig;
  using D = DataConfig;
  using O = OptimConfig;
  using T = TrainConfig;
  using Dist = DistConfig;
  using Ddp = DdpConfig;
  using Dl = DilocoConfig;
  using S = StreamingConfig;
  using N = NolocoConfig;
  using L = LocalsgdConfig;
  using Sp = SparselocoConfig;
  using P = PipelineConfig;
  using C = CommConfig;
  return {
      bind("model", "vocab_size", &R::model, &M::vocab_size, "vocabulary size; 0 takes it from the data"),
      bind("model", "hidden_size", &R::model, &M::hidden_size, "width of the residual stream"),
      bind("model", "intermediate_size", &R::model, &M::intermediate_size,
           "SwiGLU hidden width; 0 means 32*ceil(8*hidden/3/32)"),
      bind("model", "num_hidden_layers", &R::model, &M::num_hidden_layers, "transformer blocks"),
      bind("model", "num_attention_heads", &R::model, &M::num_attention_heads, "query heads"),
      bind("model", "num_key_value_heads", &R::model, &M::num_key_value_heads,
           "key/value heads (grouped-query attention); 0 means num_attention_heads"),
      bind("model", "max_position_embeddings", &R::model, &M::max_position_embeddings,
           "longest sequence the model accepts; 0 means data.seq_len"),
      bind("model", "rope_theta", &R::model, &M::rope_theta, "rotary embedding base"),
      bind("model", "rms_norm_eps", &R::model, &M::rms_norm_eps, "RMSNorm epsilon"),
      bind("model", "tie_word_embeddings", &R::model, &M::tie_word_embeddings,
           "share the embedding matrix with the output layer"),
      bind("model", "initializer_range", &R::model, &M::initializer_range,
           "std of the normal initialisation of weights"),
      bind("data", "dir", &R::data, &D::dir, "directory written by `loco prepare`"),
      bind("data", "seq_len", &R::data, &D::seq_len, "tokens per training sequence"),
      bind("optim", "lr", &R::optim, &O::lr, "peak learning rate of AdamW"),
      bind("optim", "min_lr_ratio", &R::optim, &O::min_lr_ratio, "final lr as a fraction of the peak"),
      bind("optim", "beta1", &R::optim, &O::beta1, "AdamW beta1"),
      bind("optim", "beta2", &R::optim, &O::beta2, "AdamW beta2"),
      bind("optim", "eps", &R::optim, &O::eps, "AdamW epsilon"),
      bind("optim", "weight_decay", &R::optim, &O::weight_decay,
           "decoupled weight decay on matrices (not on norm weights): a number, or 1/T (one over the run's steps)"),
      bind("optim", "grad_clip", &R::optim, &O::grad_clip, "max global gradient norm; 0 disables"),
      bind("optim", "schedule", &R::optim, &O::schedule, "learning-rate schedule after warmup",
           {{"cosine", ""}, {"linear", ""}, {"constant", ""}, {"wsd", "warmup-stable-decay"}}),
      bind("optim", "warmup_steps", &R::optim, &O::warmup_steps, "linear warmup steps"),
      bind("optim", "decay_fraction", &R::optim, &O::decay_fraction,
           "wsd: fraction of the steps spent in the final decay"),
      bind("train", "steps", &R::train, &T::steps, "optimizer steps (set this or train.tokens)"),
      bind("train", "tokens", &R::train, &T::tokens, "token budget (set this or train.steps)"),
      bind("train", "batch_size", &R::train, &T::batch_size,
           "sequences per optimizer step (global or per replica: dist.batch)"),
      bind("train", "micro_batch_size", &R::train, &T::micro_batch_size,
           "sequences per forward/backward (gradient accumulation); 0 means one replica's batch"),
      bind("train", "seed", &R::train, &T::seed, "seed of initialisation and data order"),
      bind("train", "eval_every", &R::train, &T::eval_every, "steps between evaluations; 0: only at the end"),
      bind("train", "eval_batches", &R::train, &T::eval_batches,
           "validation batches of train.batch_size sequences per evaluation"),
      bind("train", "checkpoint_every", &R::train, &T::checkpoint_every,
           "steps between checkpoints; 0: only at the end"),
      bind("train", "keep_checkpoints", &R::train, &T::keep_checkpoints,
           "checkpoints kept in each replica's (and stage's) directory, the newest; older ones are removed as new "
           "ones are written; 0: all"),
      bind("train", "stop_check_every", &R::train, &T::stop_check_every,
           "steps between the replicas' checks for SIGTERM/Ctrl-C, besides each synchronisation; 0: only there"),
      bind("train", "log_every", &R::train, &T::log_every, "steps between metrics lines"),
      bind("train", "out_dir", &R::train, &T::out_dir, "run directory (metrics, config, checkpoints)"),
      bind("train", "device", &R::train, &T::device, "where to train",
           {{"cpu", ""}, {"cuda", ""}, {"auto", "CUDA when available"}}),
      bind("train", "autocast", &R::train, &T::autocast, "mixed precision of the forward pass",
           {{"none", ""}, {"bf16", "CUDA only"}}),
      bind("train", "cuda_graphs", &R::train, &T::cuda_graphs,
           "CUDA: the fused AdamW update, and each micro-batch's forward and backward and each update launched "
           "as one CUDA graph (not with ddp or pipeline stages, which run host code in between); off by default "
           "until verified on a GPU (docs/results.md, \"The captured GPU step\")"),
      bind("train", "threads", &R::train, &T::threads,
           "intra-op CPU threads; 0: chosen from the device (1 on the CPU, where OpenBLAS has its own pool; every core "
           "with CUDA)"),
      bind("dist", "algorithm", &R::dist, &Dist::algorithm, "how replicas cooperate", algorithm_choices()),
      bind("dist", "replicas", &R::dist, &Dist::replicas,
           "replicas M; 0: 1 with backend local, WORLD_SIZE (over dist.stages) with gloo/nccl"),
      bind("dist", "backend", &R::dist, &Dist::backend, "how replicas are connected",
           {{"local", "replicas as threads of this process"},
            {"gloo", "one rank per process, see loco launch"},
            {"nccl", "one rank per process and GPU"}}),
      bind("dist", "batch", &R::dist, &Dist::batch, "what train.batch_size counts",
           {{"split", "the global batch, divided among replicas"}, {"per_replica", "each replica's batch"}}),
      bind("dist", "stages", &R::dist, &Dist::stages,
           "S: pipeline stages per replica, each a process (a thread with backend local) holding a block of "
           "layers (docs/pipeline.md); 1: none"),
      bind("dist", "check_sync", &R::dist, &Dist::check_sync,
           "debug: compare a hash of the global parameters across replicas after every outer step"),
      bind("dist", "elastic", &R::dist, &Dist::elastic,
           "replicas join and leave at any time through a coordinator: LOCO_COORDINATOR's, or with backend local "
           "one in this process (diloco, localsgd, streaming with overlap below its fragments' spacing, sparseloco, "
           "noloco, "
           "ddp)"),
      bind("dist", "churn", &R::dist, &Dist::churn,
           "elastic: scheduled faults, e.g. \"2@40:leave, 2@80:return, 1@60:stall=3\" (R@STEP:EVENT) or "
           "\"random:SEED[:FAULTS]\""),
      bind("dist", "aggregation", &R::dist, &Dist::aggregation,
           "how the outer step of diloco, localsgd, streaming and sparseloco combines the replicas' pseudo-gradients "
           "(docs/algorithms.md \"Robust aggregation\")",
           {{"mean", "the average; one bad replica can move it anywhere"},
            {"clip", "each clipped to the median of the replicas' norms, then averaged"},
            {"trimmed_mean", "per coordinate, the dist.trim largest and smallest values dropped"},
            {"median", "per coordinate"},
            {"centered_clip", "from the median, dist.clip_iterations clipped averaging steps"}}),
      bind("dist", "trim", &R::dist, &Dist::trim, "trimmed_mean: values dropped at each end, per coordinate"),
      bind("dist", "clip_iterations", &R::dist, &Dist::clip_iterations, "centered_clip: iterations L"),
      bind("dist", "clip_radius", &R::dist, &Dist::clip_radius,
           "centered_clip: the clipping radius in units of the replicas' median distance to the median"),
      bind("dist", "adversary", &R::dist, &Dist::adversary,
           "simulate a bad replica: \"R@S:scale=F\" (replica R sends F times its pseudo-gradient after step S; "
           "F = -1 flips it), \"R@S:noise\" (noise of the same norm) or \"R@S:nan\"; \"\": none"),
      bind("ddp", "bucket_mb", &R::ddp, &Ddp::bucket_mb, "gradient bucket cap in MiB"),
      bind("ddp", "first_bucket_mb", &R::ddp, &Ddp::first_bucket_mb, "cap of the first bucket in MiB"),
      bind("ddp", "overlap", &R::ddp, &Ddp::overlap,
           "all-reduce buckets from autograd hooks during backward (false: all after backward)"),
      bind("diloco", "sync_every", &R::diloco, &Dl::sync_every, "H: inner steps between outer steps"),
      bind("diloco", "outer_lr", &R::diloco, &Dl::outer_lr, "outer learning rate eta"),
      bind("diloco", "outer_momentum", &R::diloco, &Dl::outer_momentum, "outer Nesterov momentum mu"),
      bind("diloco", "weighted", &R::diloco, &Dl::weighted,
           "weight each replica's pseudo-gradient by the tokens it trained on"),
      bind("diloco", "drop_rate", &R::diloco, &Dl::drop_rate,
           "probability that a replica is left out of a sync (seeded; experiments)"),
      bind("streaming", "sync_every", &R::streaming, &S::sync_every, "H: steps between syncs of one fragment"),
      bind("streaming", "fragments", &R::streaming, &S::fragments, "P: fragments of transformer blocks"),
      bind("streaming", "assignment", &R::streaming, &S::assignment, "which blocks form a fragment",
           {{"strided", "block l in fragment l mod P"}, {"sequential", "consecutive blocks"}}),
      bind("streaming", "embeddings_fragment", &R::streaming, &S::embeddings_fragment,
           "embeddings, final norm and output layer form a fragment of their own"),
      bind("streaming", "overlap", &R::streaming, &S::overlap,
           "tau: inner steps that run while a fragment's exchange is in flight (with overlap_auto: until measured or "
           "predicted)"),
      bind("streaming", "overlap_auto", &R::streaming, &S::overlap_auto,
           "choose tau from the measured exchange and step times: the smallest that hides the exchange"),
      bind("streaming", "mix", &R::streaming, &S::mix, "alpha: weight of the local fragment when mixing (tau > 0)"),
      bind("streaming", "outer_lr", &R::streaming, &S::outer_lr, "outer learning rate eta"),
      bind("streaming", "outer_momentum", &R::streaming, &S::outer_momentum, "outer Nesterov momentum mu"),
      bind("streaming", "codec", &R::streaming, &S::codec, "exchange codec", codec_choices()),
      bind("noloco", "sync_every", &R::noloco, &N::sync_every, "H: inner steps between outer steps"),
      bind("noloco", "momentum", &R::noloco, &N::momentum, "alpha: momentum of the slow weights"),
      bind("noloco", "beta", &R::noloco, &N::beta, "beta: weight of the pair's mean local progress"),
      bind("noloco", "gamma", &R::noloco, &N::gamma, "gamma: weight of the pull towards the pair's mean"),
      bind("localsgd", "sync_every", &R::localsgd, &L::sync_every, "H (H_base with the QSR)"),
      bind("localsgd", "qsr_alpha", &R::localsgd, &L::qsr_alpha,
           "Quadratic Synchronisation Rule: H = max(H_base, floor((alpha/lr)^2)); 0 keeps H fixed"),
      bind("sparseloco", "sync_every", &R::sparseloco, &Sp::sync_every, "H: inner steps between outer steps"),
      bind("sparseloco", "outer_lr", &R::sparseloco, &Sp::outer_lr, "outer learning rate eta (plain SGD step)"),
      bind("sparseloco", "beta", &R::sparseloco, &Sp::beta, "decay of the error-feedback accumulator, in [0, 1]"),
      bind("sparseloco", "topk", &R::sparseloco, &Sp::topk,
           "values sent per tile of up to 64x64 (64: 1.56%, 128: 3.1%); rounded down to even"),
      bind("sparseloco", "bits", &R::sparseloco, &Sp::bits, "bits per sent value: 2 or 4"),
      bind("sparseloco", "average", &R::sparseloco, &Sp::average, "what a coordinate's values are averaged over",
           {{"contributors", "the replicas that sent it (the reference code's)"},
            {"replicas", "every replica, 0 for one that did not send it"}}),
      bind("pipeline", "schedule", &R::pipeline, &P::schedule,
           "order of a stage's forward and backward passes over the micro-batches of train.micro_batch_size",
           {{"1f1b", "one forward, one backward: stage s holds at most S - s micro-batches' activations"},
            {"fill-drain", "GPipe: every forward, then every backward"},
            {"eager",
             "for slow links: every forward first on all stages but the last, which backpropagates each "
             "at once, so hidden states and gradients cross at the same time"}}),
      bind("pipeline", "partition", &R::pipeline, &P::partition,
           "decoder layers per stage: balanced (by parameters, embedding and head counted on the end stages), "
           "measured (by the time of a layer, the embedding and the head, timed at set-up) or a list such as "
           "\"3,4,4,3\""),
      bind("pipeline", "codec", &R::pipeline, &P::codec, "codec of the activations and gradients between stages",
           codec_choices()),
      bind("pipeline", "bandwidth_mbps", &R::pipeline, &P::bandwidth_mbps,
           "emulated link between a replica's stages in Mbit/s, waited out: one value or one per stage; empty: none"),
      bind("pipeline", "latency_ms", &R::pipeline, &P::latency_ms,
           "emulated one-way latency between stages in ms (one or per stage), waited out"),
      bind("comm", "codec", &R::comm, &C::codec, "codec of diloco/localsgd exchanges", codec_choices()),
      bind("comm", "block_size", &R::comm, &C::block_size, "values per scale of the quantised codecs"),
      bind("comm", "bandwidth_mbps", &R::comm, &C::bandwidth_mbps,
           "emulated link in Mbit/s: one value or one per rank (comma-separated); empty: none"),
      bind("comm", "latency_ms", &R::comm, &C::latency_ms, "emulated one-way latency in ms (one or per rank)"),
      bind("comm", "delay", &R::comm, &C::delay, "how much of the emulated link time is also waited out",
           {{"none", ""}, {"latency", "rounds x latency"}, {"full", "all of it"}}),
      bind("comm", "round_kib", &R::comm, &C::round_kib,
           "pacing: KiB per peer and round of every exchange; auto sizes rounds, and how many are in flight, from "
           "comm.bandwidth_mbps and comm.latency_ms, or from what the exchanges measure; off: one round"),
      bind("comm", "timeout_s", &R::comm, &C::timeout_s, "timeout of every communication, in seconds"),
  };
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

const char* ConfigKey::type_name() const {
  static const char* names[] = {"integer", "float", "boolean", "string"};
  return names[get(RunConfig{}).index()];
}

std::string ConfigKey::description() const {
  if (choices.empty()) return help;
  std::vector<std::string> shown;
  for (const auto& c : choices) shown.push_back(c.meaning.empty() ? c.name : fmt::format("{} ({})", c.name, c.meaning));
  return fmt::format("{}: {}", help, fmt::join(shown, " | "));
}

bool ConfigKey::allows(const std::string& value) const {
  if (choices.empty()) return true;
  return std::any_of(choices.begin(), choices.end(), [&](const ConfigChoice& c) { return c.name == value; });
}

std::string ConfigKey::choice_list() const {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i].name;
  }
  return out;
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

const ConfigKey* find_config_key(const std::string& section, const std::string& name) {
  for (const auto& key : config_keys()) {
    if (key.section == section && key.name == name) return &key;
  }
  return nullptr;
}

std::string suggest_config_key(const std::string& dotted) {
  const ConfigKey* best = nullptr;
  std::size_t best_distance = 4;  // farther than this is not a typo
  for (const auto& key : config_keys()) {
    std::size_t d = edit_distance(dotted, key.dotted());
    if (d < best_distance) {
      best_distance = d;
      best = &key;
    }
  }
  return best ? fmt::format("did you mean '{}'? ", best->dotted()) : "";
}

bool quantising_codec(const std::string& name) { return name == "int8" || name == "fp4" || name == "int4"; }

std::string format_config_value(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::string>) {
          // A TOML basic string: '"' and '\\' escaped, and the control characters, which it may not hold as
          // they are (a newline in train.out_dir made the run's config.toml unreadable).
          std::string quoted = "\"";
          for (const char c : v) {
            const auto byte = static_cast<unsigned char>(c);
            if (c == '"' || c == '\\') {
              quoted += '\\';
              quoted += c;
            } else if (c == '\n') {
              quoted += "\\n";
            } else if (c == '\t') {
              quoted += "\\t";
            } else if (byte < 0x20 || byte == 0x7F) {
              quoted += fmt::format("\\u{:04X}", byte);
            } else {
              quoted += c;
            }
          }
          return quoted + "\"";
        } else if constexpr (std::is_same_v<V, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, double>) {
          std::string s = fmt::format("{}", v);
          // TOML needs a '.' or exponent to read a float back as a float.
          if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
          return s;
        } else {
          return fmt::format("{}", v);
        }
      },
      value);
}

}  // namespace loco
