// The fused MLP pieces (src/loco/model/fused_mlp.h) against the unfused forms autograd differentiates,
// a worked case, and a whole model whose parameters were flattened (gate and up then share storage)
// against the same model unflattened. The model against the Python reference: llama_parity_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "loco/model/fused_mlp.h"
#include "loco/model/llama.h"
#include "loco/model/weights.h"
#include "loco/train/inner_optimizer.h"
#include "torch/tensor_diff.h"

namespace loco {
namespace {

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

using test::max_abs_diff;

TEST(FusedMlp, SwigluAndItsGradientAreThoseOfSiluTimesUp) {
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
TEST(FusedMlp, SwigluWorkedCase) {
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

// Two 3 × 4 matrices, adjacent in one buffer or apart: the same matrix and the same gradients, and
// adjacent ones are not copied.
TEST(FusedMlp, StackedRowsReadsAdjacentStorageAndSplitsTheGradient) {
  torch::manual_seed(4);
  const torch::Tensor buffer = torch::randn({24}, kF64);
  torch::Tensor top = buffer.narrow(0, 0, 12).view({3, 4}).detach().set_requires_grad(true);
  torch::Tensor bottom = buffer.narrow(0, 12, 12).view({3, 4}).detach().set_requires_grad(true);
  const torch::Tensor apart_top = top.detach().clone().set_requires_grad(true);
  const torch::Tensor apart_bottom = bottom.detach().clone().set_requires_grad(true);
  const torch::Tensor upstream = torch::randn({6, 4}, kF64);

  const torch::Tensor adjacent = stacked_rows(top, bottom);
  const torch::Tensor apart = stacked_rows(apart_top, apart_bottom);
  EXPECT_EQ(adjacent.data_ptr(), top.data_ptr());  // the storage itself
  EXPECT_NE(apart.data_ptr(), apart_top.data_ptr());
  EXPECT_TRUE(torch::equal(adjacent, torch::cat({top, bottom})));
  EXPECT_TRUE(torch::equal(apart, adjacent));
  (adjacent * upstream).sum().backward();
  (apart * upstream).sum().backward();
  EXPECT_TRUE(torch::equal(top.grad(), upstream.narrow(0, 0, 3)));
  EXPECT_TRUE(torch::equal(bottom.grad(), upstream.narrow(0, 3, 3)));
  EXPECT_TRUE(torch::equal(apart_top.grad(), top.grad()));
  EXPECT_TRUE(torch::equal(apart_bottom.grad(), bottom.grad()));
}

// A weight changed in place between forward and backward (a load, a heal) is refused, as autograd refuses
// it for the weights an unfused linear saves.
TEST(FusedMlp, AWeightChangedBeforeBackwardIsRefused) {
  const torch::Tensor buffer = torch::randn({16}, kF64);
  torch::Tensor top = buffer.narrow(0, 0, 8).view({2, 4}).detach().set_requires_grad(true);
  torch::Tensor bottom = buffer.narrow(0, 8, 8).view({2, 4}).detach().set_requires_grad(true);
  const torch::Tensor out = stacked_rows(top, bottom).sum();
  {
    torch::NoGradGuard no_grad;
    bottom.add_(1.0);
  }
  EXPECT_THROW(out.backward(), c10::Error);
}

// The optimizer flattens the parameters (gate and up then share storage, and the MLP reads them as one
// matrix); the loss and every gradient are those of the same model left as it was built.
TEST(FusedMlp, AFlattenedModelComputesWhatTheModelAsBuiltDoes) {
  ModelConfig config;
  config.vocab_size = 37;
  config.hidden_size = 16;
  config.intermediate_size = 24;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  auto build = [&] {
    Llama model(config);
    model->to(torch::kFloat64);
    model->init_weights(11);
    return model;
  };
  Llama as_built = build(), flattened = build();
  InnerOptimizer optimizer(model_parameters(flattened), OptimConfig{});
  const auto& mlp = flattened->model->layers->named_parameters();
  const torch::Tensor& gate = mlp["0.mlp.gate_proj.weight"];
  ASSERT_EQ(static_cast<const char*>(mlp["0.mlp.up_proj.weight"].data_ptr()),
            static_cast<const char*>(gate.data_ptr()) + gate.nbytes());  // adjacent: the fused path

  const torch::Tensor ids = torch::randint(0, 37, {3, 9}, torch::kInt64);
  const torch::Tensor targets = torch::randint(0, 37, {3, 9}, torch::kInt64);
  const torch::Tensor loss_as_built = as_built->loss(ids, targets);
  const torch::Tensor loss_flattened = flattened->loss(ids, targets);
  EXPECT_NEAR(loss_flattened.item<double>(), loss_as_built.item<double>(), 1e-13);
  loss_as_built.backward();
  loss_flattened.backward();
  const auto expected = as_built->named_parameters();
  for (const auto& item : flattened->named_parameters()) {
    SCOPED_TRACE(item.key());
    EXPECT_LT(max_abs_diff(item.value().grad(), expected[item.key()].grad()), 1e-13);
  }
}

}  // namespace
}  // namespace loco
