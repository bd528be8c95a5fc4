#include "loco/algo/outer_state_io.h"

#include <fmt/format.h>

#include "loco/model/weights.h"
#include "loco/util/error.h"

namespace loco {

torch::Tensor saved_outer_tensor(const SafetensorsContent& tensors, const std::string& name, const torch::Tensor& like) {
  const auto it = tensors.tensors.find(name);
  if (it == tensors.tensors.end() || it->second.numel() != like.numel()) {
    throw CheckpointError(fmt::format(
        "the checkpoint's strategy state ({}) has no {} of {} values; it was written by another algorithm or "
        "model. Resume with the dist.algorithm and model it was trained with",
        tensors.source.string(), name, like.numel()));
  }
  if (!it->second.is_floating_point() || !all_finite(it->second)) {
    throw CheckpointError(fmt::format("the checkpoint's strategy state ({}) holds {} with values that are not finite "
                                      "numbers; the file was altered or the run had diverged. Use an earlier "
                                      "checkpoint",
                                      tensors.source.string(), name));
  }
  return it->second;
}

std::int64_t saved_outer_integer(const nlohmann::json& json, const std::string& key, const SafetensorsContent& tensors) {
  if (!json.contains(key) || !json.at(key).is_number_integer()) {
    throw CheckpointError(fmt::format("the checkpoint's state.json has no strategy.{} (next to {}); it was written "
                                      "by another algorithm. Resume with the dist.algorithm it was trained with",
                                      key, tensors.source.string()));
  }
  const auto count = json.at(key).get<std::int64_t>();
  if (count < 0) {  // every one of them counts steps, tokens, windows or members
    throw CheckpointError(fmt::format("the checkpoint's state.json has strategy.{} = {} (next to {}), a count below 0; "
                                      "it was edited or corrupted. Resume from another checkpoint",
                                      key, count, tensors.source.string()));
  }
  return count;
}

}  // namespace loco
