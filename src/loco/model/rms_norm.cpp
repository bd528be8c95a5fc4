#include "loco/model/rms_norm.h"

namespace loco {

RMSNormImpl::RMSNormImpl(std::int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // HF upcasts to float32 for the statistics; float64 stays float64 (parity tests run in float64).
  auto compute_type = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor h = x.to(compute_type);
  torch::Tensor inv_rms = torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * (h * inv_rms).to(x.scalar_type());
}

}  // namespace loco
