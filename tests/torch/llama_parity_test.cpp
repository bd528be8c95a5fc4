// The C++ Llama against the Python reference (tests/reference/llama_ref.py, HF semantics) on a
// tiny float64 model: logits, loss and every gradient. Fixtures: tests/fixtures/llama_*.safetensors,
// regenerated with `/usr/bin/python3 tests/reference/make_fixtures.py`.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "loco/io/safetensors.h"
#include "loco/model/hf_export.h"
#include "loco/model/llama.h"
#include "loco/model/weights.h"
#include "torch/tensor_diff.h"

namespace loco {
namespace {

// float64 throughout: the two implementations differ only by summation order.
constexpr double kTolerance = 1e-10;

ModelConfig fixture_config(const SafetensorsContent& fixture) {
  return model_config_from_hf_json(nlohmann::json::parse(fixture.metadata.at("config")));
}

using test::max_abs_diff;

void check_against_fixture(const char* file) {
  const auto fixture = load_safetensors(std::string(LOCO_FIXTURE_DIR) + "/" + file);
  Llama model(fixture_config(fixture));
  model->to(torch::kFloat64);
  load_model_weights(model, fixture, "param/");

  const torch::Tensor& ids = fixture.at("input_ids");
  torch::Tensor logits = model->forward(ids);
  EXPECT_LT(max_abs_diff(logits, fixture.at("logits")), kTolerance);

  torch::Tensor loss = model->loss(ids, fixture.at("labels"));
  EXPECT_NEAR(loss.item<double>(), fixture.at("loss").item<double>(), kTolerance);
  loss.backward();
  std::size_t checked = 0;
  for (const auto& [name, param] : model_parameters(model)) {
    ASSERT_TRUE(param.grad().defined()) << name;
    EXPECT_LT(max_abs_diff(param.grad(), fixture.at("grad/" + name)), kTolerance) << name;
    ++checked;
  }
  // Every reference gradient has a counterpart (no parameter missing on the C++ side).
  std::size_t reference_grads = 0;
  for (const auto& [name, t] : fixture.tensors) reference_grads += name.rfind("grad/", 0) == 0;
  EXPECT_EQ(checked, reference_grads);
}

TEST(LlamaParity, GroupedQueryAttentionMatchesReference) { check_against_fixture("llama_gqa.safetensors"); }

TEST(LlamaParity, TiedEmbeddingsMatchReference) { check_against_fixture("llama_tied.safetensors"); }

TEST(LlamaParity, ParameterNamesAreHuggingFaces) {
  ModelConfig c;
  c.vocab_size = 10;
  c.hidden_size = 8;
  c.intermediate_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 4;
  Llama model(c);
  std::vector<std::string> names;
  for (const auto& [name, p] : model_parameters(model)) names.push_back(name);
  const std::vector<std::string> expected = {
      "model.embed_tokens.weight",
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.k_proj.weight",
      "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",
      "model.layers.0.mlp.down_proj.weight",
      "model.layers.0.input_layernorm.weight",
      "model.layers.0.post_attention_layernorm.weight",
      "model.norm.weight",
      "lm_head.weight",
  };
  EXPECT_EQ(names, expected);
  EXPECT_EQ(model->named_parameters()["model.layers.0.self_attn.k_proj.weight"].sizes(), torch::IntArrayRef({4, 8}));
}

}  // namespace
}  // namespace loco
