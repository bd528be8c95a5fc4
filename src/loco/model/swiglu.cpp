#include "loco/model/fused_mlp.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include "loco/util/error.h"

namespace loco {

namespace {

bool rows_follow_in_storage(const torch::Tensor& top, const torch::Tensor& bottom) {
  return top.dim() == 2 && bottom.dim() == 2 && top.size(1) == bottom.size(1) && top.is_contiguous() &&
         bottom.is_contiguous() && top.scalar_type() == bottom.scalar_type() && top.device() == bottom.device() &&
         top.storage().is_alias_of(bottom.storage()) && bottom.storage_offset() == top.storage_offset() + top.numel();
}

class StackedRows : public torch::autograd::Function<StackedRows> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& top,
                               const torch::Tensor& bottom) {
    // Saved for their version counters only: the tensor returned below has a counter of its own, so
    // unpacking these in backward is what refuses weights modified in place since forward (as autograd
    // does for the weights a linear saves).
    ctx->save_for_backward({top, bottom});
    ctx->saved_data["top_rows"] = top.size(0);
    // A tensor of its own over the storage the two share (not an autograd view of either: the gradient
    // goes back through backward below).
    return torch::empty({0}, top.options())
        .set_(top.storage(), top.storage_offset(), {top.size(0) + bottom.size(0), top.size(1)}, top.strides());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const std::int64_t top_rows = ctx->saved_data["top_rows"].toInt();
    (void)ctx->get_saved_variables();  // throws if a weight was modified in place since forward
    const torch::Tensor& grad = grad_outputs[0];
    return {grad.narrow(0, 0, top_rows), grad.narrow(0, top_rows, grad.size(0) - top_rows)};
  }
};

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

torch::Tensor stacked_rows(const torch::Tensor& top, const torch::Tensor& bottom) {
  if (rows_follow_in_storage(top, bottom)) return StackedRows::apply(top, bottom);
  return torch::cat({top, bottom});
}

torch::Tensor swiglu(const torch::Tensor& gate_up) {
  LOCO_CHECK(gate_up.size(-1) % 2 == 0, "swiglu of a last dimension of odd size {}", gate_up.size(-1));
  return SwiGlu::apply(gate_up);
}

}  // namespace loco
