#include "loco/model/head_loss.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include <algorithm>

#include "loco/util/error.h"
#include "loco/util/torch_compat.h"

namespace loco {

namespace {

struct ChunkLogProbabilities {
  torch::Tensor log_p;            // (rows, V), float32 or float64
  torch::ScalarType logits_type;  // what the matmul gave (bf16 under autocast)
};

// Log-probabilities of a chunk's rows: the logits in the matmul's dtype, the log-softmax in at least
// float32 (bf16 logits are converted first, a pass over the chunk, as the plain form's .float() was).
ChunkLogProbabilities log_probabilities(const torch::Tensor& hidden_rows, const torch::Tensor& weight) {
  const torch::Tensor logits = torch::matmul(hidden_rows, weight.t());
  const auto compute_type = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  return {torch::log_softmax(logits, -1, compute_type), logits.scalar_type()};
}

// Calls chunk(begin, rows) for consecutive row ranges covering [0, total).
template <typename Chunk>
void for_each_chunk(std::int64_t total, std::int64_t chunk_rows, Chunk&& chunk) {
  for (std::int64_t begin = 0; begin < total; begin += chunk_rows) chunk(begin, std::min(chunk_rows, total - begin));
}

// Σ over the chunk's rows of −log p(target).
torch::Tensor negative_log_likelihood(const torch::Tensor& log_p, const torch::Tensor& target_column) {
  return -log_p.gather(1, target_column).sum();
}

class HeadCrossEntropy : public torch::autograd::Function<HeadCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets, std::int64_t chunk_rows) {
    const std::int64_t total = hidden.size(0);
    const bool want_hidden = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1);
    // Under autocast, the operands in bf16 once (autocast would cast the weight again for every chunk:
    // it caches casts of leaf tensors only, and weight.t() is a view).
    const torch::Tensor matmul_hidden = compat::to_autocast_dtype(hidden);
    const torch::Tensor matmul_weight = compat::to_autocast_dtype(weight);
    // Gradients of the loss sum, in the inputs' dtypes; backward divides by N with the incoming gradient,
    // one pass instead of two.
    torch::Tensor grad_hidden = want_hidden ? torch::empty_like(hidden) : torch::Tensor();
    torch::Tensor grad_weight = want_weight ? torch::zeros_like(weight) : torch::Tensor();
    torch::Tensor loss_sum;
    for_each_chunk(total, chunk_rows, [&](std::int64_t begin, std::int64_t rows) {
      const torch::Tensor hidden_rows = matmul_hidden.narrow(0, begin, rows);
      const torch::Tensor target_column = targets.narrow(0, begin, rows).unsqueeze(1);
      auto [log_p, logits_type] = log_probabilities(hidden_rows, matmul_weight);
      const torch::Tensor nll = negative_log_likelihood(log_p, target_column);
      loss_sum = begin == 0 ? nll : loss_sum + nll;
      // softmax − onehot(target), in place over the log-probabilities, then in the logits' dtype (what
      // the plain form's backward hands the head's matmul).
      const torch::Tensor minus_one = torch::full({rows, 1}, -1.0, log_p.options());
      const torch::Tensor grad_logits = log_p.exp_().scatter_add_(1, target_column, minus_one).to(logits_type);
      if (want_hidden) grad_hidden.narrow(0, begin, rows).copy_(torch::matmul(grad_logits, matmul_weight));
      if (want_weight) grad_weight.add_(torch::matmul(grad_logits.t(), hidden_rows));
    });
    // Saved variables (not saved_data): released once backward has run.
    ctx->save_for_backward({grad_hidden, grad_weight});
    ctx->saved_data["rows"] = total;
    return loss_sum / static_cast<double>(total);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor scale = grad_outputs[0] / static_cast<double>(ctx->saved_data["rows"].toInt());
    const auto saved = ctx->get_saved_variables();
    torch::Tensor grad_hidden, grad_weight;
    if (saved[0].defined()) grad_hidden = saved[0] * scale;
    if (saved[1].defined()) grad_weight = saved[1] * scale;
    return {grad_hidden, grad_weight, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor head_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                                 std::int64_t chunk_rows) {
  LOCO_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
             "head_cross_entropy: hidden (N, C) and weight (V, C), got {} and {} dimensions", hidden.dim(),
             weight.dim());
  LOCO_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "head_cross_entropy: one target per row");
  LOCO_CHECK(hidden.size(0) > 0, "head_cross_entropy of no rows");
  const std::int64_t logits_per_chunk = hidden.is_cuda() ? kHeadLossChunkLogitsCuda : kHeadLossChunkLogitsCpu;
  const std::int64_t rows = chunk_rows > 0 ? chunk_rows : std::max<std::int64_t>(1, logits_per_chunk / weight.size(0));
  if (torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad())) {
    return HeadCrossEntropy::apply(hidden, weight, targets, rows);
  }
  const torch::Tensor matmul_hidden = compat::to_autocast_dtype(hidden);
  const torch::Tensor matmul_weight = compat::to_autocast_dtype(weight);
  torch::Tensor loss_sum;
  for_each_chunk(hidden.size(0), rows, [&](std::int64_t begin, std::int64_t count) {
    const torch::Tensor nll =
        negative_log_likelihood(log_probabilities(matmul_hidden.narrow(0, begin, count), matmul_weight).log_p,
                                targets.narrow(0, begin, count).unsqueeze(1));
    loss_sum = begin == 0 ? nll : loss_sum + nll;
  });
  return loss_sum / static_cast<double>(hidden.size(0));
}

}  // namespace loco
