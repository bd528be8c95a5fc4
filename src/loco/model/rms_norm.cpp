#include "loco/model/rms_norm.h"

#include "loco/util/torch_compat.h"

namespace loco {

RMSNormImpl::RMSNormImpl(std::int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // For float32/float64 activations (the residual stream under autocast, the parity tests) HF's
  // formula is at::rms_norm's: one fused kernel each way on CUDA where libtorch has it.
  if (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64) {
    torch::Tensor y = compat::rms_norm(x, weight, eps_);
    if (y.defined()) return y;
  }
  // HF upcasts to float32 for the statistics; float64 stays float64 (parity tests run in float64).
  auto compute_type = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor h = x.to(compute_type);
  torch::Tensor inv_rms = torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * (h * inv_rms).to(x.scalar_type());
}

}  // namespace loco
