// The SwiGLU MLP's first half in fewer passes over memory:
//   [g, u] = x · [W_gate; W_up]ᵀ     one matmul instead of two (and, backward, one for ∂x instead of two
//                                     and an addition of their results),
//   swiglu([g, u]) = silu(g) · u      whose backward writes ∂g and ∂u into one tensor, the layout the
//                                     matmul's backward reads, instead of two tensors and a concatenation.
// Parameters keep Hugging Face's names and shapes (gate_proj.weight, up_proj.weight): checkpoints,
// exports and the initialisation do not change.
#pragma once

#include <torch/types.h>

namespace loco {

// The rows of `top` followed by those of `bottom` (2-D, same columns) as one matrix, gradients flowing
// back to both. Where `bottom`'s storage starts where `top`'s ends (FlatParameters lays the MLP's gate
// and up weights out so, note "flat-parameters") the matrix is their storage itself; otherwise a copy.
torch::Tensor stacked_rows(const torch::Tensor& top, const torch::Tensor& bottom);

// silu(g) · u for gate_up = [g, u] along the last dimension (an even size).
torch::Tensor swiglu(const torch::Tensor& gate_up);

}  // namespace loco
