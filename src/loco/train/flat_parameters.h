// Note "flat-parameters": the model's parameters and gradients live in a few contiguous 1-D buffers,
// one per optimizer group, and every parameter tensor is a view into them (same TensorImpl, so the
// modules keep working). Autograd accumulates into the gradient views in place, and the optimizer,
// gradient clipping and (later) communication run once per buffer instead of once per tensor:
// for small models the per-tensor dispatch of ~10 AdamW ops × every parameter dominated the step.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "loco/io/safetensors.h"

namespace loco {

class FlatParameters {
 public:
  struct Slot {
    std::string name;
    std::size_t group;
    std::int64_t offset;  // in elements, within the group's buffer
    std::vector<std::int64_t> sizes;
  };

  // Moves every parameter of `parameters` into the buffer of group `group_of(param)` (groups
  // 0..groups−1), keeping values, and gives each a zeroed gradient view (unless `with_gradients` is false:
  // a model that is only evaluated needs no gradient buffer the size of its parameters).
  FlatParameters(const NamedTensors& parameters, std::size_t groups,
                 const std::function<std::size_t(const torch::Tensor&)>& group_of, bool with_gradients = true);

  // The group's buffer (1-D); its .grad() is the group's gradient buffer.
  const torch::Tensor& buffer(std::size_t group) const { return buffers_[group]; }
  std::size_t groups() const { return buffers_.size(); }
  const std::vector<Slot>& slots() const { return slots_; }
  // The model's parameter tensors (same autograd identity), in slot order.
  const std::vector<torch::Tensor>& parameter_tensors() const { return parameters_; }

  // Per-parameter views ("prefix/<name>") of a tensor laid out like the buffer of each group,
  // e.g. an optimizer moment: one flat tensor per group.
  NamedTensors unflatten(const std::vector<torch::Tensor>& per_group, const std::string& prefix) const;

  void zero_grad();

 private:
  std::vector<torch::Tensor> buffers_;
  std::vector<Slot> slots_;
  std::vector<torch::Tensor> parameters_;
};

}  // namespace loco
