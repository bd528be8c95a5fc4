// Rotary embeddings (src/loco/model/rotary.h) against Hugging Face's form x·cos + rotate_half(x)·sin
// written out with autograd ops, a worked case that fails on a flipped sign, and inputs that are views
// of a wider projection (the q and k heads of attention's one q/k/v tensor).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "loco/model/rotary.h"
#include "torch/tensor_diff.h"

namespace loco {
namespace {

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

using test::max_abs_diff;

// HF's apply_rotary_pos_emb for x (B, T, heads, d), angles computed here from theta.
torch::Tensor hf_rotary(const torch::Tensor& x, double theta) {
  const std::int64_t T = x.size(1), d = x.size(-1), half = d / 2;
  const torch::Tensor inv_freq = torch::pow(theta, -torch::arange(0, d, 2, kF64) / static_cast<double>(d));
  const torch::Tensor freqs = torch::outer(torch::arange(T, kF64), inv_freq);
  const torch::Tensor angles = torch::cat({freqs, freqs}, -1).view({T, 1, d}).to(x.scalar_type());
  const torch::Tensor rotated_half = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * angles.cos() + rotated_half * angles.sin();
}

TEST(Rotary, MatchesHuggingFacesFormAndItsGradient) {
  torch::manual_seed(5);
  RotaryEmbedding rotary(8, 500.0);
  // (B, T, heads, d) as a view of 5 heads of which 3 are rotated: strided, as attention passes q and k.
  const torch::Tensor wide = torch::randn({2, 7, 5, 8}, kF64);
  const torch::Tensor ours_in = wide.clone().set_requires_grad(true);
  const torch::Tensor theirs_in = wide.clone().set_requires_grad(true);
  const torch::Tensor ours = rotary.apply(ours_in.narrow(2, 1, 3));
  const torch::Tensor theirs = hf_rotary(theirs_in.narrow(2, 1, 3), 500.0);
  EXPECT_LT(max_abs_diff(ours, theirs), 1e-14);
  // A non-contiguous upstream gradient, as attention's transposes give.
  const torch::Tensor upstream = torch::randn({2, 3, 7, 8}, kF64).transpose(1, 2);
  ours.backward(upstream);
  theirs.backward(upstream);
  EXPECT_LT(max_abs_diff(ours_in.grad(), theirs_in.grad()), 1e-14);
  EXPECT_TRUE(torch::equal(ours_in.grad().narrow(2, 0, 1), torch::zeros({2, 7, 1, 8}, kF64)));
}

TEST(Rotary, Float32AgreesWithTheFormulaInFloat32) {
  torch::manual_seed(6);
  RotaryEmbedding rotary(16, 10000.0);
  const torch::Tensor x = torch::randn({3, 11, 2, 16});
  EXPECT_LT(max_abs_diff(rotary.apply(x), hf_rotary(x.to(torch::kFloat64), 10000.0)), 1e-5);
}

// head_dim 2: inv_freq = 1, so position t turns (x₁, x₂) by t radians counter-clockwise:
// (1, 0) → (cos t, sin t) and (0, 1) → (−sin t, cos t). The gradient of y·u turns u back: ∂x = R(−t)·u.
TEST(Rotary, WorkedCaseTurnsEachPairByItsPosition) {
  RotaryEmbedding rotary(2, 10000.0);
  const torch::Tensor x = torch::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0}, kF64)
                              .view({1, 2, 2, 2})  // positions 0 and 1, two heads each
                              .set_requires_grad(true);
  const torch::Tensor y = rotary.apply(x);
  const double c = std::cos(1.0), s = std::sin(1.0);
  const torch::Tensor expected = torch::tensor({1.0, 0.0, 0.0, 1.0, c, s, -s, c}, kF64).view({1, 2, 2, 2});
  EXPECT_LT(max_abs_diff(y, expected), 1e-15);
  const torch::Tensor upstream = torch::tensor({0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0}, kF64).view({1, 2, 2, 2});
  y.backward(upstream);
  const torch::Tensor expected_grad = torch::tensor({0.0, 0.0, 0.0, 0.0, c, -s, s, c}, kF64).view({1, 2, 2, 2});
  EXPECT_LT(max_abs_diff(x.grad(), expected_grad), 1e-15);
}

// The tables are cached for the longest length seen: a shorter sequence afterwards reads their first rows.
TEST(Rotary, AShorterSequenceAfterALongerOneGetsTheSamePositions) {
  torch::manual_seed(7);
  RotaryEmbedding rotary(4, 100.0);
  const torch::Tensor x = torch::randn({1, 9, 1, 4}, kF64);
  const torch::Tensor long_result = rotary.apply(x);
  EXPECT_TRUE(torch::equal(rotary.apply(x.narrow(1, 0, 5)), long_result.narrow(1, 0, 5)));
}

}  // namespace
}  // namespace loco
