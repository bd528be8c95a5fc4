#include "loco/model/decoder_layer.h"

#include <torch/torch.h>

#include "loco/model/stacked_rows.h"
#include "loco/model/swiglu.h"
#include "loco/util/torch_compat.h"

namespace loco {

MlpImpl::MlpImpl(const ModelConfig& c) {
  gate_proj = register_module("gate_proj", projection(c.hidden_size, c.intermediate_size));
  up_proj = register_module("up_proj", projection(c.hidden_size, c.intermediate_size));
  down_proj = register_module("down_proj", projection(c.intermediate_size, c.hidden_size));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  // down_proj(silu(gate_proj(x)) · up_proj(x)) with gate and up as one matmul (stacked_rows.h).
  const torch::Tensor gate_up = torch::nn::functional::linear(x, stacked_rows({gate_proj->weight, up_proj->weight}));
  return down_proj(swiglu(gate_up));
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c) {
  // Registration order fixes the parameter order (and so DDP bucket order later): HF's order.
  self_attn = register_module("self_attn", Attention(c));
  mlp = register_module("mlp", Mlp(c));
  input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x) {
  // Under autocast the normalised activations go to bf16 once, not once per projection reading them.
  torch::Tensor h = x + self_attn(compat::to_autocast_dtype(input_layernorm(x)));
  return h + mlp(compat::to_autocast_dtype(post_attention_layernorm(h)));
}

}  // namespace loco
