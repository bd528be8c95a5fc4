// Moving a model's parameters in and out of named tensors (HF names), with shape checks that name
// the offending tensor.
#pragma once

#include <string>

#include "loco/io/safetensors.h"
#include "loco/model/llama.h"

namespace loco {

NamedTensors model_parameters(const Llama& model);

// The decoder layer a parameter belongs to, from its HF name ("model.layers.{i}.…"), or -1 for the embedding,
// the final norm and the head.
std::int64_t decoder_layer_of(const std::string& name);

// Copies every parameter from `content` (by name); throws CheckpointError, before copying any, when one is
// missing, has another shape (a checkpoint of a different model) or type, or holds NaN or infinite values, or
// when `content` holds a tensor under `prefix` the model does not have.
void load_model_weights(Llama& model, const SafetensorsContent& content, const std::string& prefix = "");

std::string shape_string(c10::IntArrayRef sizes);  // "64x128"

// No NaN or infinite value in `tensor` (a floating one), checked without a temporary of its size.
bool all_finite(const torch::Tensor& tensor);

}  // namespace loco
