#include "loco/train/flat_parameters.h"

#include <torch/torch.h>

#include "loco/util/error.h"

namespace loco {

FlatParameters::FlatParameters(const NamedTensors& parameters, std::size_t groups,
                               const std::function<std::size_t(const torch::Tensor&)>& group_of, bool with_gradients) {
  LOCO_CHECK(!parameters.empty(), "no parameters to flatten");
  std::vector<std::int64_t> sizes(groups, 0);
  for (const auto& [name, p] : parameters) {
    const std::size_t g = group_of(p);
    LOCO_CHECK(g < groups, "parameter {} assigned to group {} of {}", name, g, groups);
    slots_.push_back(Slot{name, g, sizes[g], p.sizes().vec()});
    sizes[g] += p.numel();
  }
  const auto options = parameters.front().second.options();
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups; ++g) {
    buffers_.push_back(torch::zeros({sizes[g]}, options).set_requires_grad(true));
    if (with_gradients) buffers_.back().mutable_grad() = torch::zeros({sizes[g]}, options);
  }
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Slot& slot = slots_[i];
    torch::Tensor p = parameters[i].second;  // shares the module's TensorImpl
    torch::Tensor& buffer = buffers_[slot.group];
    const std::int64_t numel = p.numel();
    buffer.narrow(0, slot.offset, numel).copy_(p.reshape({-1}));
    // Re-point the parameter at its slice of the buffer: same tensor object, new storage.
    p.set_(buffer.storage(), buffer.storage_offset() + slot.offset, p.sizes(), torch::IntArrayRef(p.strides()));
    if (with_gradients) p.mutable_grad() = buffer.grad().narrow(0, slot.offset, numel).view(p.sizes());
    parameters_.push_back(p);
  }
}

NamedTensors FlatParameters::unflatten(const std::vector<torch::Tensor>& per_group, const std::string& prefix) const {
  NamedTensors out;
  for (const Slot& slot : slots_) {
    std::int64_t numel = 1;
    for (auto s : slot.sizes) numel *= s;
    out.emplace_back(prefix + slot.name, per_group[slot.group].narrow(0, slot.offset, numel).view(slot.sizes));
  }
  return out;
}

void FlatParameters::zero_grad() {
  for (auto& b : buffers_) b.mutable_grad().zero_();
}

}  // namespace loco
