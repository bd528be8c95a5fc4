// max |a − b| of two tensors of one shape, in float64 whatever their dtypes: the measure the numerics
// tests compare against their tolerances.
#pragma once

#include <torch/torch.h>

namespace loco::test {

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace loco::test
