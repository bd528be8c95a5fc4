#include "loco/train/inner_optimizer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "loco/model/weights.h"
#include "loco/util/error.h"
#include "loco/util/torch_compat.h"

namespace loco {

namespace {

constexpr std::size_t kDecayed = 0;     // matrices: embeddings and projections
constexpr std::size_t kNotDecayed = 1;  // vectors: norm weights

}  // namespace

FlatParameters optimizer_layout(const NamedTensors& named_parameters, bool with_gradients) {
  return FlatParameters(
      named_parameters, 2, [](const torch::Tensor& p) { return p.dim() >= 2 ? kDecayed : kNotDecayed; },
      with_gradients);
}

InnerOptimizer::InnerOptimizer(const NamedTensors& named_parameters, const OptimConfig& c, bool fused_on_cuda)
    : flat_(optimizer_layout(named_parameters)) {
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(c.lr)
                                                            .betas({c.beta1, c.beta2})
                                                            .eps(c.eps)
                                                            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{flat_.buffer(kDecayed)}, options(c.resolved_weight_decay));
  groups.emplace_back(std::vector<torch::Tensor>{flat_.buffer(kNotDecayed)}, options(0.0));
  adamw_ = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(c.lr));
#if LOCO_CUDA_GRAPHS
  fused_ = fused_on_cuda && flat_.buffer(kDecayed).is_cuda() && flat_.buffer(kDecayed).scalar_type() == torch::kFloat32;
#else
  (void)fused_on_cuda;
#endif
  if (fused_) {
    const auto on_device = flat_.buffer(kDecayed).options().dtype(torch::kFloat32);
    lr_on_device_ = torch::full({}, c.lr, on_device);
    for (std::size_t g = 0; g < flat_.groups(); ++g) steps_on_device_.push_back(torch::zeros({}, on_device));
  }
}

torch::optim::AdamWParamState& InnerOptimizer::installed_state(std::size_t group) {
  return static_cast<torch::optim::AdamWParamState&>(
      *adamw_->state().at(compat::optimizer_state_key(flat_.buffer(group))));
}

torch::optim::AdamWOptions& InnerOptimizer::options_of(std::size_t group) {
  return static_cast<torch::optim::AdamWOptions&>(adamw_->param_groups()[group].options());
}

void InnerOptimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < flat_.groups(); ++g) options_of(g).lr(lr);
  if (fused_) lr_on_device_.fill_(lr);  // queued: no wait for the device
}

torch::Tensor InnerOptimizer::clip_gradients(double max_norm,
                                             const std::function<double(double)>& whole_squared_norm) {
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> grads{flat_.buffer(kDecayed).grad(), flat_.buffer(kNotDecayed).grad()};
  if (whole_squared_norm) {
    double own = 0;
    for (const auto& grad : grads) own += grad.to(torch::kFloat64).pow(2).sum().item<double>();
    const double norm = std::sqrt(whole_squared_norm(own));
    if (max_norm > 0) {
      const double scale = std::min(max_norm / (norm + 1e-6), 1.0);
      for (const auto& grad : grads) grad.mul_(scale);
    }
    return torch::tensor(norm, torch::kFloat64);
  }
  // torch.nn.utils.clip_grad_norm_'s arithmetic (the norm of the per-group norms; scale
  // max_norm / (norm + 1e-6) clamped at 1) with the scale applied on the device: libtorch's C++ version
  // reads the norm back to return a double, a wait for the device in every step (note "device-step").
  torch::Tensor norm = torch::stack({grads[0].norm(), grads[1].norm()}).norm();
  if (max_norm > 0) {
    const torch::Tensor scale = torch::clamp_max(max_norm / (norm + 1e-6), 1.0);
    for (const auto& grad : grads) grad.mul_(scale);
  }
  return norm;
}

void InnerOptimizer::step() {
  begin_step();
  update();
}

void InnerOptimizer::begin_step() {
  if (!fused_) return;  // torch::optim::AdamW counts in its step()
  if (state_of(kDecayed) == nullptr) {  // the first step: zero moments, as torch::optim::AdamW starts from
    const auto [exp_avg, exp_avg_sq] = zero_moments();
    install_state(exp_avg, exp_avg_sq, 0);
  }
  const std::int64_t step = steps_taken() + 1;
  for (std::size_t g = 0; g < flat_.groups(); ++g) {
    torch::optim::AdamWParamState& state = installed_state(g);
    state.step(step);
    steps_on_device_[g].fill_(static_cast<double>(step));
  }
}

// The fused kernel computes what torch::optim::AdamW does (decoupled decay p ← p·(1 − lr·λ), the two moments,
// bias corrections from the step count, p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + ε)) in one pass, in
// float32 arithmetic: the two agree to float rounding (tests/torch/cuda_step_test.cpp).
void InnerOptimizer::update() {
  if (!fused_) {
    adamw_->step();
    return;
  }
#if LOCO_CUDA_GRAPHS
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < flat_.groups(); ++g) {
    torch::optim::AdamWParamState& state = installed_state(g);
    const torch::optim::AdamWOptions& options = options_of(g);
    const std::vector<torch::Tensor> params{flat_.buffer(g)}, grads{flat_.buffer(g).grad()},
        exp_avgs{state.exp_avg()}, exp_avg_sqs{state.exp_avg_sq()}, steps{steps_on_device_[g]};
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr_on_device_,
                      std::get<0>(options.betas()), std::get<1>(options.betas()), options.weight_decay(),
                      options.eps(), /*amsgrad=*/false, /*maximize=*/false);
  }
#endif
}

void InnerOptimizer::zero_grad() { flat_.zero_grad(); }

const torch::optim::AdamWParamState* InnerOptimizer::state_of(std::size_t group) const {
  auto it = adamw_->state().find(compat::optimizer_state_key(flat_.buffer(group)));
  if (it == adamw_->state().end()) return nullptr;
  return &static_cast<const torch::optim::AdamWParamState&>(*it->second);
}

NamedTensors InnerOptimizer::state_tensors() const {
  const auto* decayed = state_of(kDecayed);
  const auto* not_decayed = state_of(kNotDecayed);
  if (decayed == nullptr || not_decayed == nullptr) return {};
  NamedTensors out = flat_.unflatten({decayed->exp_avg(), not_decayed->exp_avg()}, "exp_avg/");
  for (auto& named : flat_.unflatten({decayed->exp_avg_sq(), not_decayed->exp_avg_sq()}, "exp_avg_sq/")) {
    out.push_back(std::move(named));
  }
  return out;
}

std::int64_t InnerOptimizer::steps_taken() const {
  const auto* state = state_of(kDecayed);
  return state == nullptr ? 0 : state->step();
}

void InnerOptimizer::load_state(const SafetensorsContent& content, std::int64_t steps_taken) {
  if (steps_taken == 0) {  // a state from before the first step: no moments (drop any this optimizer has)
    adamw_->state().clear();
    return;
  }
  torch::NoGradGuard no_grad;
  // The moments are read into tensors of their own and installed only once all were read: a refused file
  // leaves the optimizer as it was (a heal adopts into a live replica).
  auto [exp_avg, exp_avg_sq] = zero_moments();
  NamedTensors views = flat_.unflatten(exp_avg, "exp_avg/");  // the names state_tensors() gives them
  for (auto& named : flat_.unflatten(exp_avg_sq, "exp_avg_sq/")) views.push_back(std::move(named));
  for (auto& [name, view] : views) {
    const torch::Tensor& saved = content.at(name);
    if (saved.sizes() != view.sizes()) {
      throw CheckpointError(fmt::format("optimizer state {} in {} has shape {} but the model's parameter has {}; "
                                        "the checkpoint belongs to a different model",
                                        name, content.source.string(), shape_string(saved.sizes()),
                                        shape_string(view.sizes())));
    }
    // Moments that are not finite, or a negative second moment (its square root divides the step), would
    // train into NaN at once and be written into the next checkpoint.
    const bool second_moment = name.rfind("exp_avg_sq/", 0) == 0;
    const bool negative = second_moment && saved.numel() > 0 && saved.min().item<double>() < 0;
    if (!saved.is_floating_point() || !all_finite(saved) || negative) {
      throw CheckpointError(fmt::format("optimizer state {} in {} holds values that are not {}; the file was altered "
                                        "or the run had diverged. Use an earlier checkpoint",
                                        name, content.source.string(),
                                        second_moment ? "finite numbers of 0 or more" : "finite numbers"));
    }
    view.copy_(saved);
  }
  install_state(exp_avg, exp_avg_sq, steps_taken);
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> InnerOptimizer::zero_moments() const {
  std::vector<torch::Tensor> exp_avg, exp_avg_sq;
  for (std::size_t g = 0; g < flat_.groups(); ++g) {
    exp_avg.push_back(torch::zeros_like(flat_.buffer(g)));
    exp_avg_sq.push_back(torch::zeros_like(flat_.buffer(g)));
  }
  return {std::move(exp_avg), std::move(exp_avg_sq)};
}

void InnerOptimizer::install_state(const std::vector<torch::Tensor>& exp_avg,
                                   const std::vector<torch::Tensor>& exp_avg_sq, std::int64_t steps_taken) {
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < flat_.groups(); ++g) {
    auto& slot = adamw_->state()[compat::optimizer_state_key(flat_.buffer(g))];
    if (slot) {
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      state.exp_avg().copy_(exp_avg[g]);
      state.exp_avg_sq().copy_(exp_avg_sq[g]);
      state.step(steps_taken);
      continue;
    }
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(steps_taken);
    state->exp_avg(exp_avg[g]);
    state->exp_avg_sq(exp_avg_sq[g]);
    slot = std::move(state);
  }
}

}  // namespace loco
