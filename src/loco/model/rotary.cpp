#include "loco/model/rotary.h"

#include <torch/torch.h>

namespace loco {

RotaryEmbedding::RotaryEmbedding(std::int64_t head_dim, double theta) : head_dim_(head_dim), theta_(theta) {}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbedding::tables(std::int64_t length, torch::ScalarType dtype,
                                                                torch::Device device) {
  if (!cos_.defined() || cos_.size(0) < length || cos_.scalar_type() != dtype || cos_.device() != device) {
    // HF computes inv_freq in float32 (a float32 model sees float32 angles); float64 models get
    // float64 angles so parity tests can compare at 1e-10.
    auto angle_type = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto opts = torch::TensorOptions().dtype(angle_type);
    torch::Tensor exponents =
        torch::arange(0, head_dim_, 2, torch::kInt64).to(angle_type) / static_cast<double>(head_dim_);
    torch::Tensor inv_freq = 1.0 / torch::pow(torch::tensor(theta_, opts), exponents);
    torch::Tensor positions = torch::arange(length, torch::kInt64).to(angle_type);
    torch::Tensor freqs = torch::outer(positions, inv_freq);  // (T, d/2)
    torch::Tensor angles = torch::cat({freqs, freqs}, -1);    // (T, d)
    cos_ = angles.cos().to(dtype).to(device);
    // rotate_half(x)·sin = roll(x, d/2)·[−sin₁, sin₂]: the sign of rotate_half lives in the table.
    torch::Tensor sin = angles.sin();
    const std::int64_t half = head_dim_ / 2;
    sin_ = torch::cat({-sin.narrow(-1, 0, half), sin.narrow(-1, half, half)}, -1).to(dtype).to(device);
  }
  return {cos_.narrow(0, 0, length), sin_.narrow(0, 0, length)};
}

torch::Tensor RotaryEmbedding::apply(const torch::Tensor& x) {
  auto [cos, signed_sin] = tables(x.size(1), x.scalar_type(), x.device());
  cos = cos.unsqueeze(1);  // (T, 1, d): broadcast over the heads of (B, T, heads, d)
  signed_sin = signed_sin.unsqueeze(1);
  // x·cos + rotate_half(x)·sin with rotate_half([x1, x2]) = [−x2, x1] = roll(x, d/2)·[−1, 1]: one
  // roll instead of two slices, a negation and a concatenation (and their gradients).
  return torch::addcmul(x * cos, x.roll(head_dim_ / 2, -1), signed_sin);
}

}  // namespace loco
