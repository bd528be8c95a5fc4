// One Llama block (HF LlamaDecoderLayer), pre-norm residual:
//   h = x + attn(input_layernorm(x));  y = h + mlp(post_attention_layernorm(h))
// with the SwiGLU MLP  mlp(x) = down_proj(silu(gate_proj(x)) · up_proj(x)).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "loco/config/run_config.h"
#include "loco/model/attention.h"
#include "loco/model/rms_norm.h"

namespace loco {

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) → (B, T, C)

  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) → (B, T, C)

  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace loco
