// Reading a strategy's outer state back from a checkpoint, with errors that name the checkpoint
// file and say what to do (docs/design.md §4): a missing or misshapen tensor means the checkpoint was
// written by another algorithm or model.
#pragma once

#include <nlohmann/json.hpp>

#include "loco/io/safetensors.h"

namespace loco {

// The saved tensor `name`, checked to have as many elements as `like`.
torch::Tensor saved_outer_tensor(const SafetensorsContent& tensors, const std::string& name, const torch::Tensor& like);

// The integer `key` of the strategy's state.json entry.
std::int64_t saved_outer_integer(const nlohmann::json& json, const std::string& key, const SafetensorsContent& tensors);

}  // namespace loco
