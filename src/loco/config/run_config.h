// The run configuration: one struct per TOML section (docs/design.md §3 "Config and CLI").
// Field names are the config keys; the table in config_keys.cpp binds each to its help text, so
// parsing, printing and `--help-config` all come from one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loco/config/adversary.h"

namespace loco {

// Hugging Face LlamaConfig names, so that `loco export` maps them one to one.
struct ModelConfig {
  std::int64_t vocab_size = 0;         // 0: taken from the prepared data
  std::int64_t hidden_size = 64;
  std::int64_t intermediate_size = 0;  // 0: 32·ceil(8·hidden/3 / 32), Llama's SwiGLU sizing
  std::int64_t num_hidden_layers = 2;
  std::int64_t num_attention_heads = 4;
  std::int64_t num_key_value_heads = 0;      // 0: same as num_attention_heads (no GQA)
  std::int64_t max_position_embeddings = 0;  // 0: data.seq_len
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;

  std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

struct DataConfig {
  std::string dir = "data/brown";
  std::int64_t seq_len = 128;
};

struct OptimConfig {
  double lr = 3e-4;
  double min_lr_ratio = 0.1;  // the schedule decays to lr·min_lr_ratio
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  // Decoupled weight decay on matrices (embeddings, projections), not on norm weights, as written: a
  // number, or "1/T" for the inverse of the run's optimizer steps (the DiLoCo scaling-law recipe).
  std::string weight_decay = "0.1";
  double resolved_weight_decay = 0.1;  // the number AdamW applies, from weight_decay by resolve_derived
  double grad_clip = 1.0;     // max global gradient norm; 0 disables clipping
  std::string schedule = "cosine";  // cosine | linear | constant | wsd
  std::int64_t warmup_steps = 100;
  double decay_fraction = 0.2;  // wsd: fraction of the steps spent decaying at the end
};

struct TrainConfig {
  std::int64_t steps = 0;   // optimizer steps; set this or `tokens`
  std::int64_t tokens = 0;  // token budget; steps = ceil(tokens / (batch_size·seq_len))
  std::int64_t batch_size = 16;       // sequences per optimizer step (see dist.batch for replicas)
  std::int64_t micro_batch_size = 0;  // sequences per forward/backward; 0: one replica's batch
  std::int64_t seed = 0;
  std::int64_t eval_every = 100;  // 0: evaluate only at the end
  std::int64_t eval_batches = 20;
  std::int64_t checkpoint_every = 0;  // 0: only the final checkpoint
  std::int64_t keep_checkpoints = 0;  // the newest N of each part's checkpoints/ are kept; 0: all
  std::int64_t stop_check_every = 64;  // note "graceful-stop": steps between the replicas' checks for a stop signal
  std::int64_t log_every = 10;
  std::string out_dir = "runs/default";
  std::string device = "cpu";     // cpu | cuda | auto
  std::string autocast = "none";  // none | bf16 (CUDA only)
  bool cuda_graphs = false;       // CUDA: fused update, micro-batches and updates as graphs (note "cuda-graphs")
  std::int64_t threads = 0;       // intra-op threads; 0: chosen from the device (note "auto-threads")
};

// How replicas cooperate (docs/design.md §3 "Strategy"; docs/algorithm-reference.md).
struct DistConfig {
  std::string algorithm = "none";  // none | ddp | diloco | streaming | noloco | localsgd | sparseloco
  std::int64_t replicas = 0;       // M; 0: 1 with backend local, WORLD_SIZE with gloo/nccl
  std::string backend = "local";   // local (M threads in this process) | gloo | nccl
  std::string batch = "split";     // split: train.batch_size is the global batch | per_replica
  std::int64_t stages = 1;         // S: pipeline stages (processes) per replica (docs/pipeline.md); 1: none
  bool check_sync = false;         // hash the global parameters on every replica after each outer step
  bool elastic = false;            // members join and leave through a coordinator (docs/fault-tolerance.md)
  std::string churn;               // elastic + local: simulated faults (config/churn_schedule.h); "": none
  std::string adversary;           // a simulated bad replica (config/adversary.h); "": none
  // How the DiLoCo family combines the replicas' pseudo-gradients (algo/robust_aggregation.h).
  std::string aggregation = "mean";  // mean | clip | trimmed_mean | median | centered_clip
  std::int64_t trim = 1;             // trimmed_mean: values dropped at each end, per coordinate
  std::int64_t clip_iterations = 20;  // centered_clip: L
  double clip_radius = 1.0;          // centered_clip: τ in units of the median distance to the median
};

struct DdpConfig {
  double bucket_mb = 25;        // cap of a gradient bucket, in MiB
  double first_bucket_mb = 1;   // the first bucket (last layers) is small so that it launches early
  bool overlap = true;          // launch buckets from autograd hooks during backward
};

struct DilocoConfig {
  std::int64_t sync_every = 100;  // H inner steps
  double outer_lr = 0.7;          // η
  double outer_momentum = 0.9;    // μ (Nesterov, PyTorch form)
  bool weighted = false;          // weight each Δ_m by the tokens replica m trained on since the last sync
  double drop_rate = 0;           // probability that a replica's Δ is left out of a sync (seeded)
};

struct StreamingConfig {
  std::int64_t sync_every = 100;    // H: every fragment syncs every H steps
  std::int64_t fragments = 2;       // P
  std::string assignment = "strided";  // strided (block l -> l mod P) | sequential
  bool embeddings_fragment = false;    // embeddings, final norm and head as a fragment of their own
  std::int64_t overlap = 1;         // τ: inner steps between sending Δ_p and applying the result
  bool overlap_auto = false;        // choose τ from the measured exchange and step times (algo/overlap_auto.h)
  double mix = 0.5;                 // α: θ_m,p ← α·θ_m,p + (1−α)·θ̃_p when τ > 0
  double outer_lr = 0.4;
  double outer_momentum = 0.9;
  std::string codec = "fp4";        // fp32 | bf16 | int8 | fp4 | int4
};

struct NolocoConfig {
  std::int64_t sync_every = 50;  // H
  double momentum = 0.5;         // α
  double beta = 0.7;             // β (pseudo-gradient term)
  double gamma = 0.7;            // γ (consensus term)
};

struct LocalsgdConfig {
  std::int64_t sync_every = 4;  // H_base
  double qsr_alpha = 0;         // Quadratic Synchronisation Rule: H = max(H_base, (α/lr)²); 0 = fixed H
};

// SparseLoCo (algo/sparse_exchange.h): the reference code's settings (docs/algorithm-reference.md §12).
struct SparselocoConfig {
  std::int64_t sync_every = 30;          // H
  double outer_lr = 1.0;                 // η of the plain outer step
  double beta = 0.95;                    // decay of the error-feedback accumulator
  std::int64_t topk = 64;                // values sent per tile of up to 64 x 64 (64: 1.56%)
  std::int64_t bits = 2;                 // bits per sent value: 2 | 4
  std::string average = "contributors";  // contributors (of each coordinate) | replicas
};

// How a replica of dist.stages > 1 stages runs (docs/pipeline.md). Its micro-batches are the
// accumulation steps of train.micro_batch_size.
struct PipelineConfig {
  std::string schedule = "1f1b";       // 1f1b | fill-drain | eager (pipeline/schedule.h)
  std::string partition = "balanced";  // balanced (by parameters) | measured (by time) | layers per stage, "3,4,4,3"
  std::string codec = "fp32";          // activations and their gradients between stages (comm/codecs)
  // The emulated link between a replica's stages, as comm.bandwidth_mbps / comm.latency_ms (one value, or
  // one per stage); its time is waited out (comm.delay = full): step time and bubble show it. "": none.
  std::string bandwidth_mbps = "";
  std::string latency_ms = "";
};

struct CommConfig {
  std::string codec = "fp32";      // codec of diloco/localsgd exchanges (streaming has its own)
  std::int64_t block_size = 128;   // values per scale block of the quantised codecs
  std::string bandwidth_mbps = "";  // emulated link: one value or one per rank, comma-separated; "" = none
  std::string latency_ms = "";
  std::string delay = "none";      // none | latency | full: how the emulated link shows in real time
  std::string round_kib = "auto";  // auto | off | KiB per peer and round of every exchange (comm/link/round_size.h)
  double timeout_s = 600;
};

// The settings every strategy that exchanges parameters shares, gathered from their keys (no defaults
// of its own): the codec (comm.codec; streaming.codec for streaming), comm.block_size, dist.check_sync.
// The rule that takes the place of the mean of the pseudo-gradients (algo/robust_aggregation.h).
struct AggregationConfig {
  std::string rule = "mean";     // mean | clip | trimmed_mean | median | centered_clip
  std::int64_t trim = 1;         // b of trimmed_mean
  std::int64_t iterations = 20;  // L of centered_clip
  double radius = 1.0;           // ρ of centered_clip: τ in units of the median distance to the start
};

struct ExchangeConfig {
  std::string codec;
  std::int64_t block_size = 0;
  bool check_sync = false;
  AggregationConfig aggregation;
  std::optional<AdversarySpec> adversary;  // dist.adversary: a simulated bad replica
};

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  TrainConfig train;
  DistConfig dist;
  DdpConfig ddp;
  DilocoConfig diloco;
  StreamingConfig streaming;
  NolocoConfig noloco;
  LocalsgdConfig localsgd;
  SparselocoConfig sparseloco;
  PipelineConfig pipeline;
  CommConfig comm;

  // Sequences one replica trains on per step, and all replicas together (dist.batch).
  std::int64_t replica_batch() const;
  std::int64_t global_batch() const;
  std::int64_t accumulation_steps() const { return replica_batch() / train.micro_batch_size; }
  // The exchange settings of dist.algorithm.
  ExchangeConfig exchange() const;
};

}  // namespace loco
