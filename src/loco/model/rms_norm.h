// RMSNorm as in Hugging Face LlamaRMSNorm: y = w · x / sqrt(mean(x²) + eps), computed in at least
// float32 and cast back to the input's dtype before the weight is applied.
#pragma once

#include <torch/nn/module.h>

namespace loco {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(std::int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);  // (…, dim) → (…, dim)

  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace loco
