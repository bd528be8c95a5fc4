#include "loco/algo/parameter_fragment.h"

#include <fmt/format.h>

#include "loco/model/weights.h"
#include "loco/util/error.h"

namespace loco {

void ParameterFragment::add(const torch::Tensor& slice, std::vector<std::int64_t> shape) {
  LOCO_CHECK(slice.dim() == 1 && slice.is_contiguous(), "fragment slices are 1-D views ({} dims)", slice.dim());
  shapes_.push_back(std::move(shape));
  if (!slices_.empty()) {
    torch::Tensor& last = slices_.back();
    if (last.storage().is_alias_of(slice.storage()) &&
        last.storage_offset() + last.numel() == slice.storage_offset()) {
      last = last.as_strided({last.numel() + slice.numel()}, {1});  // same storage offset, longer
      numel_ += slice.numel();
      return;
    }
  }
  slices_.push_back(slice);
  numel_ += slice.numel();
}

torch::Tensor ParameterFragment::read() const {
  torch::NoGradGuard no_grad;
  // A pipeline stage may hold none of a fragment's blocks (Streaming DiLoCo across pipeline replicas).
  if (slices_.empty()) return torch::empty({0}, torch::kFloat32);
  torch::Tensor out = torch::empty({numel_}, slices_.front().options().device(torch::kCPU).requires_grad(false));
  std::int64_t offset = 0;
  for (const auto& s : slices_) {
    out.narrow(0, offset, s.numel()).copy_(s);
    offset += s.numel();
  }
  return out;
}

void ParameterFragment::write(const torch::Tensor& values) {
  torch::NoGradGuard no_grad;
  LOCO_CHECK(values.numel() == numel_, "fragment {} has {} values, got {}", name_, numel_, values.numel());
  std::int64_t offset = 0;
  for (auto& s : slices_) {
    s.copy_(values.narrow(0, offset, s.numel()));
    offset += s.numel();
  }
}

void with_values(ParameterFragment& fragment, const torch::Tensor& values, const std::function<void()>& fn) {
  const torch::Tensor own = fragment.read();
  fragment.write(values);
  fn();
  fragment.write(own);
}

void with_values(std::vector<ParameterFragment>& fragments, const std::vector<torch::Tensor>& values,
                 const std::function<void()>& fn) {
  std::vector<torch::Tensor> own;
  for (std::size_t p = 0; p < fragments.size(); ++p) {
    own.push_back(fragments[p].read());
    fragments[p].write(values[p]);
  }
  fn();
  for (std::size_t p = 0; p < fragments.size(); ++p) fragments[p].write(own[p]);
}

namespace {

torch::Tensor slice_of(const FlatParameters& parameters, const FlatParameters::Slot& slot) {
  std::int64_t numel = 1;
  for (auto s : slot.sizes) numel *= s;
  return parameters.buffer(slot.group).detach().narrow(0, slot.offset, numel);
}

}  // namespace

ParameterFragment whole_model(const FlatParameters& parameters) {
  ParameterFragment all("all parameters");
  // Group by group, each in slot order: the slices of a group's buffer merge into the whole buffer.
  for (std::size_t g = 0; g < parameters.groups(); ++g) {
    for (const auto& slot : parameters.slots()) {
      if (slot.group == g) all.add(slice_of(parameters, slot), slot.sizes);
    }
  }
  return all;
}

std::vector<ParameterFragment> block_fragments(const FlatParameters& parameters, std::int64_t num_layers,
                                               std::int64_t fragments, bool strided, bool embeddings_own_fragment) {
  LOCO_CHECK(fragments >= 1 && fragments <= num_layers, "{} fragments of {} blocks", fragments, num_layers);
  auto fragment_of_block = [&](std::int64_t block) {
    return strided ? block % fragments : block * fragments / num_layers;
  };
  std::vector<std::vector<std::int64_t>> blocks(static_cast<std::size_t>(fragments));
  for (std::int64_t l = 0; l < num_layers; ++l) blocks[static_cast<std::size_t>(fragment_of_block(l))].push_back(l);
  std::vector<ParameterFragment> out;
  for (std::int64_t p = 0; p < fragments; ++p) {
    out.emplace_back(fmt::format("fragment {} (blocks {})", p, fmt::join(blocks[static_cast<std::size_t>(p)], ",")));
  }
  if (embeddings_own_fragment) out.emplace_back(fmt::format("fragment {} (embeddings, norm, head)", fragments));
  // Slots are in model order, so each fragment's slices arrive in buffer order and merge.
  for (const auto& slot : parameters.slots()) {
    const std::int64_t block = decoder_layer_of(slot.name);
    std::int64_t p = 0;
    if (block >= 0) {
      p = fragment_of_block(block);
    } else if (embeddings_own_fragment) {
      p = fragments;
    } else if (slot.name.find("embed_tokens") == std::string::npos) {
      p = fragment_of_block(num_layers - 1);  // final norm and output layer
    } else {
      p = fragment_of_block(0);
    }
    out[static_cast<std::size_t>(p)].add(slice_of(parameters, slot), slot.sizes);
  }
  return out;
}

}  // namespace loco
