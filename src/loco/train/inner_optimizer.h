// The inner optimizer: AdamW (the same update as torch.optim.AdamW) over two parameter groups,
// matrices with weight decay and norm weights without, plus global-norm gradient clipping and
// conversion of its state to named tensors for checkpoints. The parameters are flattened into one
// buffer per group first (note "flat-parameters"), so each of these runs once per group.
//
// The update is libtorch's torch::optim::AdamW (about ten passes over each buffer), or, when asked for on
// CUDA in a build with the captured GPU step (note "cuda-graphs"), libtorch's fused kernel at::_fused_adamw_
// (one pass) with the learning rate and the step count read from device tensors, so that the update can be
// captured in a CUDA graph. The moments stay in torch::optim::AdamW's state either way (checkpoints, heals).
#pragma once

#include <torch/optim/adamw.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loco/config/run_config.h"
#include "loco/io/safetensors.h"
#include "loco/train/flat_parameters.h"

namespace loco {

// The layout of the inner optimizer's flat buffers (matrices, decayed, then vectors), which a strategy's flat
// outer state follows: taking over the storage of `named_parameters`, as the optimizer does.
FlatParameters optimizer_layout(const NamedTensors& named_parameters, bool with_gradients = true);

class InnerOptimizer {
 public:
  // Takes over the storage of `named_parameters` (see FlatParameters): create it after the model
  // has moved to its device and dtype. `fused_on_cuda`: the fused update where it can run (float32 CUDA
  // parameters, a build with LOCO_CUDA_GRAPHS); updates_on_device() says whether it does.
  InnerOptimizer(const NamedTensors& named_parameters, const OptimConfig& config, bool fused_on_cuda = false);

  void set_lr(double lr);
  // Scales the gradients so that their global L2 norm is at most max_norm (no-op for 0);
  // returns the norm before clipping, a 0-d tensor on the gradients' device (read it when it is needed:
  // reading waits for the device). For a part of the model (a pipeline stage), `whole_squared_norm`
  // maps this part's squared gradient norm to the whole model's, and that norm is clipped, as torch's
  // clip_grad_norm_ does (scale max_norm / (norm + 1e-6) where below 1).
  torch::Tensor clip_gradients(double max_norm, const std::function<double(double)>& whole_squared_norm = {});
  // begin_step() then update().
  void step();
  // The two halves of a step, for a step captured as a CUDA graph: begin_step() is the host's part (counts
  // the step and, for the fused update, writes the count where the kernel reads it), update() the
  // device's part, which launches kernels only and reads no host value that changes between steps when
  // updates_on_device().
  void begin_step();
  void update();
  bool updates_on_device() const { return fused_; }
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
  torch::optim::AdamWParamState& installed_state(std::size_t group);  // once there is one
  torch::optim::AdamWOptions& options_of(std::size_t group);
  // Zero first and second moments, one buffer each per group.
  std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> zero_moments() const;
  // Installs moments and the step count for every group: into the tensors the state holds when it has
  // them (a captured update keeps reading those addresses), else as new state.
  void install_state(const std::vector<torch::Tensor>& exp_avg, const std::vector<torch::Tensor>& exp_avg_sq,
                     std::int64_t steps_taken);

  FlatParameters flat_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
  bool fused_ = false;
  torch::Tensor lr_on_device_;                    // fused: float32, 0-d
  std::vector<torch::Tensor> steps_on_device_;  // fused: one float32 0-d count per group
};

}  // namespace loco
