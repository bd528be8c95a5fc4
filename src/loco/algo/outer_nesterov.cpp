#include "loco/algo/outer_nesterov.h"

#include "loco/util/error.h"

namespace loco {

OuterNesterov::OuterNesterov(torch::Tensor initial_global, double lr, double momentum)
    : global_(std::move(initial_global)), buffer_(torch::zeros_like(global_)), lr_(lr), momentum_(momentum) {}

torch::Tensor OuterNesterov::pseudo_gradient(const torch::Tensor& local) const { return global_ - local; }

torch::Tensor OuterNesterov::advance(const torch::Tensor& mean_pseudo_gradient) {
  buffer_.mul_(momentum_).add_(mean_pseudo_gradient);
  return mean_pseudo_gradient.add(buffer_, momentum_);
}

void OuterNesterov::step(const torch::Tensor& mean_pseudo_gradient) {
  torch::NoGradGuard no_grad;
  global_.sub_(advance(mean_pseudo_gradient), lr_);
}

void OuterNesterov::step_alone(const torch::Tensor& mean_pseudo_gradient, const torch::Tensor& local) {
  torch::NoGradGuard no_grad;
  torch::Tensor own = pseudo_gradient(local);
  own.sub_(advance(mean_pseudo_gradient), lr_);
  global_.copy_(local).add_(own);
}

OuterNesterov OuterNesterov::copy() const {
  OuterNesterov copied(global_.clone(), lr_, momentum_);
  copied.buffer_.copy_(buffer_);
  return copied;
}

void OuterNesterov::load(const torch::Tensor& global, const torch::Tensor& momentum_buffer) {
  LOCO_CHECK(global.numel() == global_.numel() && momentum_buffer.numel() == buffer_.numel(),
             "outer state of {} values for {} parameters", global.numel(), global_.numel());
  global_.copy_(global.reshape({-1}));
  buffer_.copy_(momentum_buffer.reshape({-1}));
}

}  // namespace loco
