#include "loco/model/stacked_rows.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include "loco/util/error.h"

namespace loco {

namespace {

bool rows_follow_in_storage(const std::vector<torch::Tensor>& parts) {
  const torch::Tensor& first = parts.front();
  std::int64_t next_offset = first.storage_offset();
  for (const torch::Tensor& part : parts) {
    if (part.dim() != 2 || part.size(1) != first.size(1) || !part.is_contiguous() ||
        part.scalar_type() != first.scalar_type() || part.device() != first.device() ||
        !part.storage().is_alias_of(first.storage()) || part.storage_offset() != next_offset) {
      return false;
    }
    next_offset += part.numel();
  }
  return true;
}

class StackedRows : public torch::autograd::Function<StackedRows> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::TensorList parts) {
    // Saved for their version counters only: the tensor returned below has a counter of its own, so
    // unpacking these in backward is what refuses weights modified in place since forward (as autograd
    // does for the weights a linear saves).
    ctx->save_for_backward(parts.vec());
    std::int64_t rows = 0;
    for (const torch::Tensor& part : parts) rows += part.size(0);
    const torch::Tensor& first = parts.front();
    // A tensor of its own over the storage the parts share (not an autograd view of any: the gradient
    // goes back through backward below).
    return torch::empty({0}, first.options())
        .set_(first.storage(), first.storage_offset(), {rows, first.size(1)}, first.strides());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto parts = ctx->get_saved_variables();  // throws if a weight was modified in place since forward
    const torch::Tensor& grad = grad_outputs[0];
    torch::autograd::variable_list grads;
    std::int64_t row = 0;
    for (const torch::Tensor& part : parts) {
      grads.push_back(grad.narrow(0, row, part.size(0)));
      row += part.size(0);
    }
    return grads;
  }
};

}  // namespace

torch::Tensor stacked_rows(const std::vector<torch::Tensor>& parts) {
  LOCO_CHECK(!parts.empty(), "stacked_rows of no matrices");
  if (rows_follow_in_storage(parts)) return StackedRows::apply(torch::TensorList(parts));
  return torch::cat(parts);
}

}  // namespace loco
