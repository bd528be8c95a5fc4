// Several weight matrices read by one matmul: Llama's q/k/v projections and the MLP's gate/up projections
// all read the same input, so   [y₁, …, yₙ] = x · [W₁; …; Wₙ]ᵀ   is one matmul instead of n (and, backward,
// one for ∂x instead of n and n − 1 additions of their results).
// The parameters keep Hugging Face's names and shapes: checkpoints, exports and the initialisation do not
// change.
#pragma once

#include <torch/types.h>

#include <vector>

namespace loco {

// The rows of `parts` (2-D, the same columns), in order, as one matrix, gradients flowing back to each
// part. Where each part's storage starts where the previous part's ends (FlatParameters lays a layer's
// parameters out in registration order, note "flat-parameters") the matrix is that storage itself;
// otherwise a copy (torch::cat): a model whose parameters are not flattened (evaluation, export).
torch::Tensor stacked_rows(const std::vector<torch::Tensor>& parts);

}  // namespace loco
