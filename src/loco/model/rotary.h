// Rotary position embeddings in the rotate-half layout of Hugging Face Llama:
//   inv_freq_i = theta^(−2i/d),  angle(t, i) = t · inv_freq_i  (i < d/2),
//   rope([x₁, x₂]) = [x₁·cos − x₂·sin, x₂·cos + x₁·sin]
// over the two halves x₁, x₂ of a head's d values (HF writes it x·cos + rotate_half(x)·sin with the d/2
// angles repeated twice and rotate_half([x₁, x₂]) = [−x₂, x₁]). Its gradient is the inverse rotation:
//   ∂x = [∂y₁·cos + ∂y₂·sin, ∂y₂·cos − ∂y₁·sin].
#pragma once

#include <torch/types.h>


namespace loco {

class RotaryEmbedding {
 public:
  RotaryEmbedding(std::int64_t head_dim, double theta);

  // Applies the rotation to x of shape (B, T, heads, head_dim) at positions 0..T−1; x may have any
  // strides (q and k are views of one (B, T, heads, D) projection), but one whose last dimension is not
  // contiguous is copied first.
  // Three passes over memory forward and three back, with no copy of x (a roll or a concatenation
  // of halves would be one more each way) and nothing kept for backward but the tables.
  torch::Tensor apply(const torch::Tensor& x);

 private:
  // (T, d/2) cos and sin tables: views of one cached table for the longest length seen (rebuilt when
  // a longer sequence, another dtype or device comes), so generation's growing lengths cost one
  // table, not one per length.
  std::pair<torch::Tensor, torch::Tensor> tables(std::int64_t length, torch::ScalarType dtype, torch::Device device);

  std::int64_t head_dim_;
  double theta_;
  torch::Tensor cos_, sin_;
};

}  // namespace loco
