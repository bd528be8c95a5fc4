// The run configuration: one struct per TOML section (DESIGN.md §3 "Config and CLI").
// Field names are the config keys; the table in config_keys.cpp binds each to its help text, so
// parsing, printing and `--help-config` all come from one place.
#pragma once

#include <cstdint>
#include <string>

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
  double weight_decay = 0.1;  // applied to matrices (embeddings, projections), not to norm weights
  double grad_clip = 1.0;     // max global gradient norm; 0 disables clipping
  std::string schedule = "cosine";  // cosine | linear | constant | wsd
  std::int64_t warmup_steps = 100;
  double decay_fraction = 0.2;  // wsd: fraction of the steps spent decaying at the end
};

struct TrainConfig {
  std::int64_t steps = 0;   // optimizer steps; set this or `tokens`
  std::int64_t tokens = 0;  // token budget; steps = ceil(tokens / (batch_size·seq_len))
  std::int64_t batch_size = 16;       // sequences per optimizer step
  std::int64_t micro_batch_size = 0;  // sequences per forward/backward; 0: batch_size
  std::int64_t seed = 0;
  std::int64_t eval_every = 100;  // 0: evaluate only at the end
  std::int64_t eval_batches = 20;
  std::int64_t checkpoint_every = 0;  // 0: only the final checkpoint
  std::int64_t log_every = 10;
  std::string out_dir = "runs/default";
  std::string device = "cpu";     // cpu | cuda | auto
  std::string autocast = "none";  // none | bf16 (CUDA only)
  std::int64_t threads = 0;       // intra-op threads; 0: all cores

  std::int64_t accumulation_steps() const { return batch_size / micro_batch_size; }
};

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  TrainConfig train;
};

}  // namespace loco
