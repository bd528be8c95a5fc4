// stacked_rows (src/loco/model/stacked_rows.h) against torch::cat, which autograd differentiates, and whole
// models whose parameters were flattened (q/k/v and gate/up then share storage and are read as one matrix
// each) against the same models unflattened. The model against the Python reference: llama_parity_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "loco/model/llama.h"
#include "loco/model/stacked_rows.h"
#include "loco/model/weights.h"
#include "loco/train/inner_optimizer.h"
#include "torch/tensor_diff.h"

namespace loco {
namespace {

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

using test::max_abs_diff;

// Three matrices of 2, 3 and 1 rows (q, k and v of a grouped-query layer have unequal row counts),
// adjacent in one buffer or apart: the same matrix and the same gradients, and adjacent ones are not copied.
TEST(StackedRows, ReadsAdjacentStorageAndSplitsTheGradient) {
  torch::manual_seed(4);
  const torch::Tensor buffer = torch::randn({24}, kF64);
  const std::vector<std::int64_t> rows = {2, 3, 1};
  std::vector<torch::Tensor> adjacent_parts, apart_parts;
  std::int64_t offset = 0;
  for (std::int64_t r : rows) {
    adjacent_parts.push_back(buffer.narrow(0, offset, r * 4).view({r, 4}).detach().set_requires_grad(true));
    apart_parts.push_back(adjacent_parts.back().detach().clone().set_requires_grad(true));
    offset += r * 4;
  }
  const torch::Tensor upstream = torch::randn({6, 4}, kF64);

  const torch::Tensor adjacent = stacked_rows(adjacent_parts);
  const torch::Tensor apart = stacked_rows(apart_parts);
  EXPECT_EQ(adjacent.data_ptr(), adjacent_parts[0].data_ptr());  // the storage itself
  EXPECT_NE(apart.data_ptr(), apart_parts[0].data_ptr());
  EXPECT_TRUE(torch::equal(adjacent, torch::cat(adjacent_parts)));
  EXPECT_TRUE(torch::equal(apart, adjacent));
  (adjacent * upstream).sum().backward();
  (apart * upstream).sum().backward();
  offset = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_TRUE(torch::equal(adjacent_parts[i].grad(), upstream.narrow(0, offset, rows[i])));
    EXPECT_TRUE(torch::equal(apart_parts[i].grad(), adjacent_parts[i].grad()));
    offset += rows[i];
  }
}

// Parts of one buffer that are not each other's neighbours (a gap, or out of order) are copied, not read
// as one span that would include the wrong rows.
TEST(StackedRows, PartsWithAGapOrOutOfOrderAreCopied) {
  const torch::Tensor buffer = torch::arange(24, kF64);
  const torch::Tensor first = buffer.narrow(0, 0, 8).view({2, 4});
  const torch::Tensor after_a_gap = buffer.narrow(0, 12, 8).view({2, 4});
  const torch::Tensor second = buffer.narrow(0, 8, 8).view({2, 4});
  for (const auto& parts : {std::vector<torch::Tensor>{first, after_a_gap}, std::vector<torch::Tensor>{second, first}}) {
    const torch::Tensor stacked = stacked_rows(parts);
    EXPECT_NE(stacked.data_ptr(), parts[0].data_ptr());
    EXPECT_TRUE(torch::equal(stacked, torch::cat(parts)));
  }
}

// A weight changed in place between forward and backward (a load, a heal) is refused, as autograd refuses
// it for the weights an unfused linear saves.
TEST(StackedRows, AWeightChangedBeforeBackwardIsRefused) {
  const torch::Tensor buffer = torch::randn({16}, kF64);
  torch::Tensor top = buffer.narrow(0, 0, 8).view({2, 4}).detach().set_requires_grad(true);
  torch::Tensor bottom = buffer.narrow(0, 8, 8).view({2, 4}).detach().set_requires_grad(true);
  const torch::Tensor out = stacked_rows({top, bottom}).sum();
  {
    torch::NoGradGuard no_grad;
    bottom.add_(1.0);
  }
  EXPECT_THROW(out.backward(), c10::Error);
}

// The parts named follow one another in the model's flat buffer (the stacked path is taken).
void expect_adjacent(const torch::OrderedDict<std::string, torch::Tensor>& parameters,
                     const std::vector<std::string>& names) {
  for (std::size_t i = 1; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const torch::Tensor& before = parameters[names[i - 1]];
    EXPECT_EQ(static_cast<const char*>(parameters[names[i]].data_ptr()),
              static_cast<const char*>(before.data_ptr()) + before.nbytes());
  }
}

// The optimizer flattens the parameters (q/k/v and gate/up then share storage, and attention and the MLP
// read them as one matrix each); the loss and every gradient are those of the same model left as it was
// built, for grouped-query and plain multi-head attention.
TEST(StackedRows, AFlattenedModelComputesWhatTheModelAsBuiltDoes) {
  for (std::int64_t kv_heads : {2, 4}) {
    SCOPED_TRACE(kv_heads);
    ModelConfig config;
    config.vocab_size = 37;
    config.hidden_size = 16;
    config.intermediate_size = 24;
    config.num_hidden_layers = 2;
    config.num_attention_heads = 4;
    config.num_key_value_heads = kv_heads;
    auto build = [&] {
      Llama model(config);
      model->to(torch::kFloat64);
      model->init_weights(11);
      return model;
    };
    Llama as_built = build(), flattened = build();
    InnerOptimizer optimizer(model_parameters(flattened), OptimConfig{});
    const auto layers = flattened->model->layers->named_parameters();
    expect_adjacent(layers, {"1.self_attn.q_proj.weight", "1.self_attn.k_proj.weight", "1.self_attn.v_proj.weight"});
    expect_adjacent(layers, {"1.mlp.gate_proj.weight", "1.mlp.up_proj.weight"});

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
}

}  // namespace
}  // namespace loco
