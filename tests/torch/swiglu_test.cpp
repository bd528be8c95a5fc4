// swiglu (src/loco/model/swiglu.h) against silu(g) · u as autograd differentiates it, and a worked case.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "loco/model/swiglu.h"
#include "torch/tensor_diff.h"

namespace loco {
namespace {

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

using test::max_abs_diff;

TEST(Swiglu, AndItsGradientAreThoseOfSiluTimesUp) {
  torch::manual_seed(3);
  const torch::Tensor values = torch::randn({2, 5, 8}, kF64) * 3;
  const torch::Tensor upstream = torch::randn({2, 5, 4}, kF64);
  const torch::Tensor fused_in = values.clone().set_requires_grad(true);
  const torch::Tensor plain_in = values.clone().set_requires_grad(true);
  const torch::Tensor fused = swiglu(fused_in);
  const torch::Tensor plain = torch::silu(plain_in.narrow(-1, 0, 4)) * plain_in.narrow(-1, 4, 4);
  EXPECT_LT(max_abs_diff(fused, plain), 1e-15);
  fused.backward(upstream);
  plain.backward(upstream);
  EXPECT_LT(max_abs_diff(fused_in.grad(), plain_in.grad()), 1e-14);
}

// g = 0, u = 2, upstream 1: silu(0) = 0 and silu'(0) = 1/2, so the output is 0, ∂g = 1·2·½ = 1, ∂u = 0;
// g = 1, u = −1: silu(1) = σ(1), silu'(1) = σ(1)(1 + 1 − σ(1)), ∂g = −silu'(1), ∂u = σ(1).
TEST(Swiglu, WorkedCase) {
  const torch::Tensor in = torch::tensor({{0.0, 1.0, 2.0, -1.0}}, kF64).set_requires_grad(true);
  const torch::Tensor out = swiglu(in);
  out.sum().backward();
  const double s = 1 / (1 + std::exp(-1.0));
  EXPECT_NEAR(out[0][0].item<double>(), 0.0, 1e-15);
  EXPECT_NEAR(out[0][1].item<double>(), -s, 1e-15);
  EXPECT_NEAR(in.grad()[0][0].item<double>(), 1.0, 1e-15);
  EXPECT_NEAR(in.grad()[0][1].item<double>(), -s * (2 - s), 1e-15);
  EXPECT_NEAR(in.grad()[0][2].item<double>(), 0.0, 1e-15);
  EXPECT_NEAR(in.grad()[0][3].item<double>(), s, 1e-15);
}

}  // namespace
}  // namespace loco
