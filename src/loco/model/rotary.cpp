#include "loco/model/rotary.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include "loco/util/error.h"

namespace loco {

namespace {

// x (…, d) as (…, 2, d/2): its two halves along a dimension of their own (a view: the last dimension is
// contiguous).
torch::Tensor halves_of(const torch::Tensor& x) {
  std::vector<std::int64_t> sizes = x.sizes().vec();
  const std::int64_t half = sizes.back() / 2;
  sizes.back() = 2;
  sizes.push_back(half);
  return x.stride(-1) == 1 ? x.view(sizes) : x.contiguous().view(sizes);
}

// The rotation of rotary.h, its halves computed in place in one output: y = x·cos, then
// y₁ −= x₂·sin and y₂ += x₁·sin. cos and sin are (T, 1, d/2): they broadcast against a half, (B, T, heads,
// d/2).
class Rotate : public torch::autograd::Function<Rotate> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return rotate(x, cos, sin, /*inverse=*/false);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    return {rotate(grad_outputs[0], saved[0], saved[1], /*inverse=*/true), torch::Tensor(), torch::Tensor()};
  }

 private:
  // The rotation by the angles (inverse: by their negatives, sin → −sin).
  static torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                              bool inverse) {
    const torch::Tensor in = halves_of(x);
    torch::Tensor out = in * cos.unsqueeze(-2);  // (T, 1, 1, d/2) against (B, T, heads, 2, d/2)
    const double sign = inverse ? -1.0 : 1.0;
    out.select(-2, 0).addcmul_(in.select(-2, 1), sin, -sign);
    out.select(-2, 1).addcmul_(in.select(-2, 0), sin, sign);
    return out.view(x.sizes());
  }
};

}  // namespace

RotaryEmbedding::RotaryEmbedding(std::int64_t head_dim, double theta) : head_dim_(head_dim), theta_(theta) {
  LOCO_CHECK(head_dim % 2 == 0, "rotary embeddings of an odd head dimension {}", head_dim);
}

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
    torch::Tensor angles = torch::outer(positions, inv_freq);  // (T, d/2)
    cos_ = angles.cos().to(dtype).to(device);
    sin_ = angles.sin().to(dtype).to(device);
  }
  return {cos_.narrow(0, 0, length), sin_.narrow(0, 0, length)};
}

torch::Tensor RotaryEmbedding::apply(const torch::Tensor& x) {
  LOCO_CHECK(x.dim() == 4 && x.size(-1) == head_dim_,
             "rotary embeddings of a {}-dimensional tensor with a last dimension of {}, not (B, T, heads, {})", x.dim(),
             x.size(-1), head_dim_);
  auto [cos, sin] = tables(x.size(1), x.scalar_type(), x.device());
  return Rotate::apply(x, cos.unsqueeze(1), sin.unsqueeze(1));  // (T, 1, d/2): broadcast over the heads
}

}  // namespace loco
