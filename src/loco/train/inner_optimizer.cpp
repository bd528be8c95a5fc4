#include "loco/train/inner_optimizer.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/torch.h>

#include "loco/model/weights.h"
#include "loco/util/error.h"
#include "loco/util/torch_compat.h"

namespace loco {

InnerOptimizer::InnerOptimizer(const NamedTensors& named_parameters, const OptimConfig& c)
    : named_parameters_(named_parameters) {
  std::vector<torch::Tensor> decayed, not_decayed;
  for (const auto& [name, p] : named_parameters_) (p.dim() >= 2 ? decayed : not_decayed).push_back(p);
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(c.lr)
                                                            .betas({c.beta1, c.beta2})
                                                            .eps(c.eps)
                                                            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, options(c.weight_decay));
  groups.emplace_back(not_decayed, options(0.0));
  adamw_ = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(c.lr));
}

void InnerOptimizer::set_lr(double lr) {
  for (auto& group : adamw_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

double InnerOptimizer::clip_gradients(double max_norm) {
  std::vector<torch::Tensor> params;
  for (const auto& [name, p] : named_parameters_) params.push_back(p);
  if (max_norm <= 0) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> norms;
    for (const auto& p : params) {
      if (p.grad().defined()) norms.push_back(p.grad().norm());
    }
    return norms.empty() ? 0.0 : torch::stack(norms).norm().item<double>();
  }
  return torch::nn::utils::clip_grad_norm_(params, max_norm);
}

void InnerOptimizer::step() { adamw_->step(); }

void InnerOptimizer::zero_grad() { adamw_->zero_grad(); }

NamedTensors InnerOptimizer::state_tensors() const {
  NamedTensors out;
  for (const auto& [name, p] : named_parameters_) {
    auto it = adamw_->state().find(compat::optimizer_state_key(p));
    if (it == adamw_->state().end()) continue;
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    out.emplace_back("exp_avg/" + name, s.exp_avg());
    out.emplace_back("exp_avg_sq/" + name, s.exp_avg_sq());
  }
  return out;
}

std::int64_t InnerOptimizer::steps_taken() const {
  for (const auto& [name, p] : named_parameters_) {
    auto it = adamw_->state().find(compat::optimizer_state_key(p));
    if (it != adamw_->state().end()) return static_cast<const torch::optim::AdamWParamState&>(*it->second).step();
  }
  return 0;
}

void InnerOptimizer::load_state(const SafetensorsContent& content, std::int64_t steps_taken) {
  if (steps_taken == 0) return;
  for (const auto& [name, p] : named_parameters_) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(steps_taken);
    for (const char* moment : {"exp_avg", "exp_avg_sq"}) {
      const torch::Tensor& saved = content.at(std::string(moment) + "/" + name);
      if (saved.sizes() != p.sizes()) {
        throw CheckpointError(fmt::format("optimizer state {}/{} in {} has shape {} but the model's parameter "
                                          "has {}; the checkpoint belongs to a different model",
                                          moment, name, content.source.string(), shape_string(saved.sizes()),
                                          shape_string(p.sizes())));
      }
      torch::Tensor copy = saved.to(p.options()).clone();
      if (std::string(moment) == "exp_avg") state->exp_avg(copy);
      else state->exp_avg_sq(copy);
    }
    adamw_->state()[compat::optimizer_state_key(p)] = std::move(state);
  }
}

}  // namespace loco
