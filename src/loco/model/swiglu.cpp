#include "loco/model/swiglu.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include "loco/util/error.h"

namespace loco {

namespace {

// silu(g)·u, d = ∂loss/∂output:  ∂g = d · u · silu'(g),  ∂u = d · silu(g). Keeps silu(g) for backward,
// as autograd would (recomputing it measured no faster on the CPU). The seam for a fused kernel: the
// element-wise work here is two kernels forward and three back.
class SwiGlu : public torch::autograd::Function<SwiGlu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& gate_up) {
    const std::int64_t half = gate_up.size(-1) / 2;
    const torch::Tensor silu_gate = torch::silu(gate_up.narrow(-1, 0, half));
    ctx->save_for_backward({gate_up, silu_gate});
    return silu_gate * gate_up.narrow(-1, half, half);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& gate_up = saved[0];
    const torch::Tensor& silu_gate = saved[1];
    const torch::Tensor& d = grad_outputs[0];
    const std::int64_t half = gate_up.size(-1) / 2;
    const torch::Tensor gate = gate_up.narrow(-1, 0, half), up = gate_up.narrow(-1, half, half);
    torch::Tensor grad = torch::empty(gate_up.sizes(), gate_up.options());  // contiguous: the matmul reads it
    torch::Tensor grad_gate = grad.narrow(-1, 0, half), grad_up = grad.narrow(-1, half, half);
    at::silu_backward_out(grad_gate, d * up, gate);
    at::mul_out(grad_up, d, silu_gate);
    return {grad};
  }
};

}  // namespace

torch::Tensor swiglu(const torch::Tensor& gate_up) {
  LOCO_CHECK(gate_up.size(-1) % 2 == 0, "swiglu of a last dimension of odd size {}", gate_up.size(-1));
  return SwiGlu::apply(gate_up);
}

}  // namespace loco
