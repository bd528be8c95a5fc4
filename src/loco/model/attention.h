// Causal multi-head attention with optional grouped-query attention (HF LlamaAttention):
// q/k/v/o projections without bias, RoPE on q and k, each key/value head shared by
// num_attention_heads / num_key_value_heads query heads, softmax in at least float32.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "loco/config/run_config.h"
#include "loco/model/rotary.h"

namespace loco {

// A Linear layer without bias, as every Llama projection is.
torch::nn::Linear projection(std::int64_t in, std::int64_t out);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) → (B, T, C)

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

  // (T, T): −inf above the diagonal (the future a query must not see), 0 elsewhere. Cached.
  const torch::Tensor& causal_bias(std::int64_t length, torch::ScalarType dtype, torch::Device device);

  std::int64_t heads_, kv_heads_, head_dim_;
  RotaryEmbedding rotary_;
  torch::Tensor bias_;
};
TORCH_MODULE(Attention);

}  // namespace loco
