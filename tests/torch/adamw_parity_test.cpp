// Three steps of loco's inner optimizer (AdamW, two parameter groups, global-norm clipping, a new
// learning rate each step) against torch.optim.AdamW in Python: tests/fixtures/adamw.safetensors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <iterator>
#include <map>

#include "loco/io/safetensors.h"
#include "loco/model/hf_export.h"
#include "loco/model/llama.h"
#include "loco/model/weights.h"
#include "loco/train/inner_optimizer.h"
#include "loco/util/error.h"

namespace loco {
namespace {

constexpr double kTolerance = 1e-10;

TEST(AdamWParity, ThreeClippedStepsMatchTorchOptim) {
  const auto fixture = load_safetensors(std::string(LOCO_FIXTURE_DIR) + "/adamw.safetensors");
  const auto hyper = nlohmann::json::parse(fixture.metadata.at("hyperparameters"));
  Llama model(model_config_from_hf_json(nlohmann::json::parse(fixture.metadata.at("config"))));
  model->to(torch::kFloat64);
  load_model_weights(model, fixture, "param/");

  OptimConfig o;
  o.beta1 = hyper.at("betas")[0];
  o.beta2 = hyper.at("betas")[1];
  o.eps = hyper.at("eps");
  o.resolved_weight_decay = hyper.at("weight_decay");
  InnerOptimizer optimizer(model_parameters(model), o);
  const auto lrs = hyper.at("lrs").get<std::vector<double>>();
  ASSERT_EQ(lrs.size(), 3u);
  for (std::size_t step = 0; step < lrs.size(); ++step) {
    optimizer.set_lr(lrs[step]);
    optimizer.zero_grad();
    torch::Tensor loss = model->loss(fixture.at("input_ids"), fixture.at("labels"));
    EXPECT_NEAR(loss.item<double>(), fixture.at("loss/" + std::to_string(step)).item<double>(), kTolerance);
    loss.backward();
    const double norm = optimizer.clip_gradients(hyper.at("max_grad_norm")).item<double>();
    EXPECT_NEAR(norm, fixture.at("grad_norm/" + std::to_string(step)).item<double>(), kTolerance);
    optimizer.step();
  }
  for (const auto& [name, param] : model_parameters(model)) {
    EXPECT_LT((param - fixture.at("after/" + name)).abs().max().item<double>(), kTolerance) << name;
  }
  EXPECT_EQ(optimizer.steps_taken(), 3);
  for (const auto& [name, moment] : optimizer.state_tensors()) {
    EXPECT_LT((moment - fixture.at(name)).abs().max().item<double>(), kTolerance) << name;
  }
}

// A saved state is read whole before any of it is installed: a NaN in one moment (a file altered, or a donor
// that lies during a heal) is refused and leaves the optimizer's moments as they were; a sound one loads.
TEST(AdamWParity, AStateWithANonFiniteMomentIsRefusedAndChangesNothing) {
  const auto fixture = load_safetensors(std::string(LOCO_FIXTURE_DIR) + "/adamw.safetensors");
  Llama model(model_config_from_hf_json(nlohmann::json::parse(fixture.metadata.at("config"))));
  model->to(torch::kFloat64);
  load_model_weights(model, fixture, "param/");
  InnerOptimizer optimizer(model_parameters(model), OptimConfig{});
  optimizer.zero_grad();
  model->loss(fixture.at("input_ids"), fixture.at("labels")).backward();
  optimizer.step();
  SafetensorsContent saved;
  for (const auto& [name, moment] : optimizer.state_tensors()) saved.tensors[name] = moment.clone();
  const SafetensorsContent sound = saved;
  const std::string last = std::prev(saved.tensors.end())->first;  // an exp_avg_sq/ tensor: after the exp_avg/ ones
  saved.tensors[last] = saved.tensors[last].clone();
  saved.tensors[last].view(-1)[0] = std::nan("");
  std::map<std::string, torch::Tensor> before;
  for (const auto& [name, moment] : optimizer.state_tensors()) before[name] = moment.clone();
  EXPECT_THROW(optimizer.load_state(saved, 1), CheckpointError);
  for (const auto& [name, moment] : optimizer.state_tensors()) EXPECT_TRUE(torch::equal(moment, before.at(name))) << name;
  for (auto& [name, moment] : optimizer.state_tensors()) moment.zero_();
  optimizer.load_state(sound, 1);
  for (const auto& [name, moment] : optimizer.state_tensors()) EXPECT_TRUE(torch::equal(moment, before.at(name))) << name;
}

}  // namespace
}  // namespace loco
