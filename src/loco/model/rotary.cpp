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
    sin_ = angles.sin().to(dtype).to(device);
  }
  return {cos_.narrow(0, 0, length), sin_.narrow(0, 0, length)};
}

torch::Tensor RotaryEmbedding::apply(const torch::Tensor& x) {
  const auto [cos, sin] = tables(x.size(2), x.scalar_type(), x.device());
  std::int64_t half = head_dim_ / 2;
  torch::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace loco
