// Rotary position embeddings in the rotate-half layout of Hugging Face Llama:
//   inv_freq_i = theta^(−2i/d),  angle(t, i) = t · inv_freq_i,  cos/sin tables repeat the d/2 angles twice,
//   rope(x) = x·cos + rotate_half(x)·sin,  rotate_half([x1, x2]) = [−x2, x1].
#pragma once

#include <torch/types.h>


namespace loco {

class RotaryEmbedding {
 public:
  RotaryEmbedding(std::int64_t head_dim, double theta);

  // Applies the rotation to q or k of shape (B, T, heads, head_dim) at positions 0..T−1 (the layout
  // the projections produce, so every operand is contiguous).
  torch::Tensor apply(const torch::Tensor& x);

 private:
  // (T, head_dim) cos and signed sin ([−sin, sin] over the two halves) tables: views of one cached
  // table for the longest length seen
  // (rebuilt when a longer sequence, another dtype or device comes), so generation's growing
  // lengths cost one table, not one per length.
  std::pair<torch::Tensor, torch::Tensor> tables(std::int64_t length, torch::ScalarType dtype, torch::Device device);

  std::int64_t head_dim_;
  double theta_;
  torch::Tensor cos_, sin_;
};

}  // namespace loco
