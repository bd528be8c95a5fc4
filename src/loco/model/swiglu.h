// The SwiGLU MLP's activation on the output of the stacked gate/up matmul (stacked_rows.h):
//   swiglu([g, u]) = silu(g) · u      whose backward writes ∂g and ∂u into one tensor, the layout the
//                                     matmul's backward reads, instead of two tensors and a concatenation.
#pragma once

#include <torch/types.h>

namespace loco {

// silu(g) · u for gate_up = [g, u] along the last dimension (an even size).
torch::Tensor swiglu(const torch::Tensor& gate_up);

}  // namespace loco
