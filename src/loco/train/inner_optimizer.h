// The inner optimizer: libtorch's AdamW (the same update as torch.optim.AdamW) over two parameter
// groups, matrices with weight decay and norm weights without, plus global-norm gradient clipping
// and conversion of its state to named tensors for checkpoints. The parameters are flattened into
// one buffer per group first (note "flat-parameters"), so each of these runs once per group.
#pragma once

#include <torch/optim/adamw.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loco/config/run_config.h"
#include "loco/io/safetensors.h"
#include "loco/train/flat_parameters.h"

namespace loco {

class InnerOptimizer {
 public:
  // Takes over the storage of `named_parameters` (see FlatParameters): create it after the model
  // has moved to its device and dtype.
  InnerOptimizer(const NamedTensors& named_parameters, const OptimConfig& config);

  void set_lr(double lr);
  // Scales the gradients so that their global L2 norm is at most max_norm (no-op for 0);
  // returns the norm before clipping, a 0-d tensor on the gradients' device (read it when it is needed:
  // reading waits for the device). For a part of the model (a pipeline stage), `whole_squared_norm`
  // maps this part's squared gradient norm to the whole model's, and that norm is clipped, as torch's
  // clip_grad_norm_ does (scale max_norm / (norm + 1e-6) where below 1).
  torch::Tensor clip_gradients(double max_norm, const std::function<double(double)>& whole_squared_norm = {});
  void step();
  void zero_grad();

  // AdamW moments as "exp_avg/<param>" and "exp_avg_sq/<param>" (empty before the first step).
  NamedTensors state_tensors() const;
  std::int64_t steps_taken() const;
  // Restores moments and the step count written by state_tensors(); throws CheckpointError when a
  // tensor is missing or has the wrong shape.
  void load_state(const SafetensorsContent& content, std::int64_t steps_taken);

  const FlatParameters& parameters() const { return flat_; }

 private:
  const torch::optim::AdamWParamState* state_of(std::size_t group) const;

  FlatParameters flat_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
};

}  // namespace loco
