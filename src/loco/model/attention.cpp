#include "loco/model/attention.h"

#include <torch/torch.h>

#include <cmath>

#include "loco/model/stacked_rows.h"
#include "loco/util/torch_compat.h"

namespace loco {

torch::nn::Linear projection(std::int64_t in, std::int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

AttentionImpl::AttentionImpl(const ModelConfig& c)
    : heads_(c.num_attention_heads), kv_heads_(c.num_key_value_heads), head_dim_(c.head_dim()),
      rotary_(c.head_dim(), c.rope_theta) {
  q_proj = register_module("q_proj", projection(c.hidden_size, heads_ * head_dim_));
  k_proj = register_module("k_proj", projection(c.hidden_size, kv_heads_ * head_dim_));
  v_proj = register_module("v_proj", projection(c.hidden_size, kv_heads_ * head_dim_));
  o_proj = register_module("o_proj", projection(heads_ * head_dim_, c.hidden_size));
}

const torch::Tensor& AttentionImpl::causal_bias(std::int64_t length, torch::ScalarType dtype, torch::Device device) {
  if (!bias_.defined() || bias_.size(0) != length || bias_.scalar_type() != dtype || bias_.device() != device) {
    bias_ = torch::full({length, length}, -std::numeric_limits<double>::infinity(),
                        torch::TensorOptions().dtype(dtype).device(device))
                .triu(1);
  }
  return bias_;
}

torch::Tensor AttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  // q, k, v: (B, H, T, D) with k and v already repeated to H heads.
#if LOCO_HAS_SDPA
  if (q.scalar_type() != torch::kFloat64) {
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  }
#endif
  const std::int64_t B = q.size(0), H = q.size(1), T = q.size(2);
  // scores = q·kᵀ/sqrt(d) + mask in one baddbmm: the scale and the causal mask (0 or −inf) ride on
  // the matmul instead of two more passes over the (B·H, T, T) scores.
  torch::Tensor scores = torch::baddbmm(causal_bias(T, q.scalar_type(), q.device()), q.reshape({B * H, T, head_dim_}),
                                        k.reshape({B * H, T, head_dim_}).transpose(1, 2), /*beta=*/1.0,
                                        /*alpha=*/1.0 / std::sqrt(static_cast<double>(head_dim_)));
  // HF takes the softmax in float32 for low-precision activations; float32/float64 stay as they are.
  torch::Tensor weights = q.scalar_type() == torch::kFloat64 || q.scalar_type() == torch::kFloat32
                              ? torch::softmax(scores, -1)
                              : torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
  return torch::bmm(weights, v.reshape({B * H, T, head_dim_})).view({B, H, T, head_dim_});
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const std::int64_t B = x.size(0), T = x.size(1);
  // q, k and v in one matmul (stacked_rows.h) as the heads of one (B, T, H + 2·KV, D) tensor; rotary on
  // its q and k heads at once; then (B, H, T, D) views: the layout the fused attention kernels read
  // without a copy. Split, not narrowed: the gradient of a split is one concatenation, that of each
  // narrowed view a zero-filled tensor of the whole size, added up.
  const torch::Tensor qkv =
      torch::nn::functional::linear(x, stacked_rows({q_proj->weight, k_proj->weight, v_proj->weight}))
          .view({B, T, heads_ + 2 * kv_heads_, head_dim_});
  const std::vector<torch::Tensor> qk_v = qkv.split_with_sizes({heads_ + kv_heads_, kv_heads_}, 2);
  const std::vector<torch::Tensor> q_k = rotary_.apply(qk_v[0]).split_with_sizes({heads_, kv_heads_}, 2);
  torch::Tensor q = q_k[0].transpose(1, 2);    // (B, H, T, D)
  torch::Tensor k = q_k[1].transpose(1, 2);    // (B, KV, T, D)
  torch::Tensor v = qk_v[1].transpose(1, 2);  // (B, KV, T, D)
  if (kv_heads_ != heads_) {
    // Query head h reads key/value head h / group (HF repeat_kv).
    const std::int64_t group = heads_ / kv_heads_;
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  torch::Tensor out = attend(q, k, v);                          // (B, H, T, D)
  out = out.transpose(1, 2).reshape({B, T, heads_ * head_dim_});  // (B, T, C)
  return o_proj(out);
}

}  // namespace loco
