// The outer optimizer of DiLoCo and Streaming DiLoCo (docs/algorithm-reference.md §1): Nesterov momentum in
// PyTorch's form (dampening 0, no weight decay) on the global parameters, fed the averaged
// pseudo-gradient instead of a gradient:
//
//     Δ   = mean_m (θ_g − θ_m)        computed by the caller (pseudo_gradient, then an all-reduce)
//     b  ← μ·b + Δ                     b starts at 0
//     θ_g ← θ_g − η·(Δ + μ·b)
//
// This is torch::optim::SGD(SGDOptions(η).momentum(μ).nesterov(true)) with .grad() = Δ, written out
// so that the update is visible and the state is two plain tensors. θ_g and b live on the host
// (they are touched once per H steps) in the parameters' dtype. η = 1, μ = 0 is plain averaging.
#pragma once

#include <torch/torch.h>

namespace loco {

class OuterNesterov {
 public:
  OuterNesterov(torch::Tensor initial_global, double lr, double momentum);

  const torch::Tensor& global() const { return global_; }
  const torch::Tensor& momentum_buffer() const { return buffer_; }
  // θ_g − θ_m for this replica's parameters `local` (host tensor of the same shape).
  torch::Tensor pseudo_gradient(const torch::Tensor& local) const;
  // One outer step with the averaged pseudo-gradient.
  void step(const torch::Tensor& mean_pseudo_gradient);
  // The same step where this replica was the synchronisation's only one, computed from its own parameters
  // `local` (θ_m when it exchanged):
  //
  //     θ_g ← θ_m + (Δ − η·(Δ̄ + μ·b)),   Δ = θ_g − θ_m, Δ̄ the exchange's result (Δ itself, or its codec's image)
  //
  // equal to step() in exact arithmetic. In floating point, η = 1 and μ = 0 give θ_m bit for bit
  // (Δ − Δ̄ = 0), where step()'s θ_g − Δ rounds wherever Δ is not exact: so one replica of DiLoCo with plain
  // averaging trains exactly as a single replica does, and any difference is a defect (issue 36).
  void step_alone(const torch::Tensor& mean_pseudo_gradient, const torch::Tensor& local);
  // Checkpoint restore.
  void load(const torch::Tensor& global, const torch::Tensor& momentum_buffer);
  // A copy with tensors of its own (an outer step computed on it leaves this one as it is).
  OuterNesterov copy() const;

 private:
  // b ← μ·b + Δ̄; returns the update direction Δ̄ + μ·b.
  torch::Tensor advance(const torch::Tensor& mean_pseudo_gradient);

  torch::Tensor global_;
  torch::Tensor buffer_;
  double lr_;
  double momentum_;
};

}  // namespace loco
