// The chunked head loss (src/loco/model/head_loss.h) against libtorch's plain form
// cross_entropy(hidden · weightᵀ, targets) and a case worked by hand. The whole model's loss and
// gradients against the Python reference: llama_parity_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "loco/model/head_loss.h"
#include "torch/tensor_diff.h"

namespace loco {
namespace {

using test::max_abs_diff;

struct Gradients {
  double loss;
  torch::Tensor hidden, weight;
};

// loss(hidden, weight, targets) and its gradients, scaled by 0.37 on the way back (as a micro-batch's
// 1 / accumulation is) so that backward's use of the incoming gradient is checked too.
template <typename Loss>
Gradients run(const torch::Tensor& hidden_values, const torch::Tensor& weight_values, const torch::Tensor& targets,
              Loss&& loss_of) {
  const torch::Tensor hidden = hidden_values.clone().set_requires_grad(true);
  const torch::Tensor weight = weight_values.clone().set_requires_grad(true);
  const torch::Tensor loss = loss_of(hidden, weight, targets);
  (loss * 0.37).backward();
  return {loss.item<double>(), hidden.grad(), weight.grad()};
}

TEST(HeadLoss, MatchesThePlainCrossEntropyForEveryChunking) {
  torch::manual_seed(5);
  const std::int64_t rows = 23, hidden_size = 8, vocab = 11;
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor hidden = torch::randn({rows, hidden_size}, f64) * 2;
  const torch::Tensor weight = torch::randn({vocab, hidden_size}, f64);
  const torch::Tensor targets = torch::randint(0, vocab, {rows}, torch::kInt64);
  const Gradients plain = run(hidden, weight, targets, [](const auto& h, const auto& w, const auto& t) {
    return torch::nn::functional::cross_entropy(torch::matmul(h, w.t()), t);
  });
  for (const std::int64_t chunk_rows : {1, 4, 7, 23, 100, 0}) {
    SCOPED_TRACE(chunk_rows);
    const Gradients chunked = run(hidden, weight, targets, [&](const auto& h, const auto& w, const auto& t) {
      return head_cross_entropy(h, w, t, chunk_rows);
    });
    EXPECT_NEAR(chunked.loss, plain.loss, 1e-12);
    EXPECT_LT(max_abs_diff(chunked.hidden, plain.hidden), 1e-12);
    EXPECT_LT(max_abs_diff(chunked.weight, plain.weight), 1e-12);
    torch::NoGradGuard no_grad;  // the loss alone, without gradients: the same value
    EXPECT_NEAR(head_cross_entropy(hidden, weight, targets, chunk_rows).item<double>(), plain.loss, 1e-12);
  }
}

TEST(HeadLoss, Float32StaysFloat32AndAgreesToItsPrecision) {
  torch::manual_seed(6);
  const torch::Tensor hidden = torch::randn({64, 16});
  const torch::Tensor weight = torch::randn({50, 16}) * 0.3;
  const torch::Tensor targets = torch::randint(0, 50, {64}, torch::kInt64);
  const Gradients plain = run(hidden, weight, targets, [](const auto& h, const auto& w, const auto& t) {
    return torch::nn::functional::cross_entropy(torch::matmul(h, w.t()), t);
  });
  const Gradients chunked = run(hidden, weight, targets, [](const auto& h, const auto& w, const auto& t) {
    return head_cross_entropy(h, w, t, 10);
  });
  EXPECT_EQ(chunked.hidden.scalar_type(), torch::kFloat32);
  EXPECT_NEAR(chunked.loss, plain.loss, 1e-5);
  EXPECT_LT(max_abs_diff(chunked.hidden, plain.hidden), 1e-6);
  EXPECT_LT(max_abs_diff(chunked.weight, plain.weight), 1e-6);
}

// One row, C = 1, V = 2: hidden 1, weight rows 0 and 1, target 1. The logits are (0, 1), so with
// p = e / (1 + e):  loss = log(1 + e) − 1,  ∂loss/∂hidden = (1 − p)·0 + (p − 1)·1 = p − 1,
// ∂loss/∂weight = ((1 − p)·1, (p − 1)·1).
TEST(HeadLoss, AWorkedCase) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const Gradients got = run(torch::ones({1, 1}, f64), torch::tensor({{0.0}, {1.0}}, f64),
                            torch::tensor({1}, torch::kInt64), [](const auto& h, const auto& w, const auto& t) {
                              return head_cross_entropy(h, w, t);
                            });
  const double p = std::exp(1.0) / (1 + std::exp(1.0));
  EXPECT_NEAR(got.loss, std::log1p(std::exp(1.0)) - 1, 1e-14);
  EXPECT_NEAR(got.hidden.item<double>(), 0.37 * (p - 1), 1e-14);
  EXPECT_NEAR(got.weight[0][0].item<double>(), 0.37 * (1 - p), 1e-14);
  EXPECT_NEAR(got.weight[1][0].item<double>(), 0.37 * (p - 1), 1e-14);
}

// A frozen head: only the hidden states get a gradient, the plain form's.
TEST(HeadLoss, AFrozenHeadStillGivesTheHiddenStatesTheirGradient) {
  torch::manual_seed(7);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor weight = torch::randn({4, 3}, f64);
  const torch::Tensor targets = torch::tensor({0, 1, 2, 3, 0}, torch::kInt64);
  const torch::Tensor chunked = torch::randn({5, 3}, f64).set_requires_grad(true);
  const torch::Tensor plain = chunked.detach().clone().set_requires_grad(true);
  head_cross_entropy(chunked, weight, targets, 2).backward();
  torch::nn::functional::cross_entropy(torch::matmul(plain, weight.t()), targets).backward();
  EXPECT_LT(max_abs_diff(chunked.grad(), plain.grad()), 1e-14);
  EXPECT_FALSE(weight.grad().defined());
}

// bf16 operands (as under autocast): logits in bf16, the log-softmax in float32, the gradient of the
// logits back in bf16 for the matmuls, as the plain form cross_entropy(logits.float()) does.
TEST(HeadLoss, Bf16LogitsGetAFloat32SoftmaxAndBf16Gradients) {
  torch::manual_seed(8);
  const torch::Tensor hidden = torch::randn({40, 16}).to(torch::kBFloat16);
  const torch::Tensor weight = (torch::randn({30, 16}) * 0.5).to(torch::kBFloat16);
  const torch::Tensor targets = torch::randint(0, 30, {40}, torch::kInt64);
  const Gradients plain = run(hidden, weight, targets, [](const auto& h, const auto& w, const auto& t) {
    return torch::nn::functional::cross_entropy(torch::matmul(h, w.t()).to(torch::kFloat32), t);
  });
  const Gradients chunked = run(hidden, weight, targets, [](const auto& h, const auto& w, const auto& t) {
    const torch::Tensor loss = head_cross_entropy(h, w, t, 16);
    EXPECT_EQ(loss.scalar_type(), torch::kFloat32);
    return loss;
  });
  EXPECT_NEAR(chunked.loss, plain.loss, 1e-5 * plain.loss);  // the same float32 arithmetic on the same logits
  EXPECT_EQ(chunked.hidden.scalar_type(), torch::kBFloat16);
  // bf16 gradients: within a few units of bf16's last place of the largest entry.
  const double scale = plain.hidden.abs().max().item<double>();
  EXPECT_LT(max_abs_diff(chunked.hidden, plain.hidden), 0.02 * scale);
  EXPECT_LT(max_abs_diff(chunked.weight, plain.weight), 0.02 * plain.weight.abs().max().item<double>());
}

}  // namespace
}  // namespace loco
