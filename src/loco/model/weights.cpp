#include "loco/model/weights.h"

#include <fmt/ranges.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <string_view>

#include "loco/util/error.h"

namespace loco {

// Sums in double over pieces of a million values: NaN or inf anywhere makes a sum non-finite, float32
// values cannot overflow it, and no temporary is the size of the tensor (isfinite makes several, and a
// sum in double of the whole tensor a double copy of it).
bool all_finite(const torch::Tensor& tensor) {
  for (const auto& piece : tensor.reshape(-1).split(std::int64_t{1} << 20)) {
    if (!std::isfinite(piece.sum(torch::kFloat64).item<double>())) return false;
  }
  return true;
}

std::int64_t decoder_layer_of(const std::string& name) {
  constexpr std::string_view prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  return std::stoll(name.substr(prefix.size()));
}

NamedTensors model_parameters(const Llama& model) {
  NamedTensors out;
  for (const auto& item : model->named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

std::string shape_string(c10::IntArrayRef sizes) { return fmt::format("{}", fmt::join(sizes, "x")); }

void load_model_weights(Llama& model, const SafetensorsContent& content, const std::string& prefix) {
  torch::NoGradGuard no_grad;
  const auto parameters = model_parameters(model);
  // Every check before the first copy: a refused file leaves the model as it was (a heal adopts into a live
  // replica).
  std::set<std::string> expected;
  for (const auto& [name, param] : parameters) {
    expected.insert(prefix + name);
    const torch::Tensor& saved = content.at(prefix + name);
    if (saved.sizes() != param.sizes()) {
      throw CheckpointError(fmt::format(
          "{} holds {} with shape {} but the model expects {}; the file belongs to a model with another "
          "configuration (check model.* in the config)",
          content.source.string(), prefix + name, shape_string(saved.sizes()), shape_string(param.sizes())));
    }
    // copy_ would convert any type, and a relabelled header (F32 bytes read as I32) would load as numbers.
    if (saved.scalar_type() != param.scalar_type()) {
      throw CheckpointError(fmt::format("{} holds {} as {} but the model's parameters are {}; the file was altered "
                                        "or written by another tool. Use another checkpoint",
                                        content.source.string(), prefix + name, c10::toString(saved.scalar_type()),
                                        c10::toString(param.scalar_type())));
    }
    if (!all_finite(saved)) {
      throw CheckpointError(fmt::format("{} holds {} with values that are not finite (NaN or infinite); the file was "
                                        "altered, or the run had diverged. Use an earlier checkpoint",
                                        content.source.string(), prefix + name));
    }
  }
  // A tensor the model has no place for: the weights belong to another configuration (more layers, an untied
  // head) than the one they are loaded for, which would otherwise drop it silently.
  for (const auto& [name, tensor] : content.tensors) {
    if (name.rfind(prefix, 0) == 0 && expected.count(name) == 0) {
      throw CheckpointError(fmt::format("{} holds {}, which the model (model.* of its config) does not have: the "
                                        "weights and the config do not belong together. Use another checkpoint",
                                        content.source.string(), name));
    }
  }
  for (const auto& [name, param] : parameters) param.copy_(content.at(prefix + name));
}

}  // namespace loco
