#include "loco/train/evaluate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "loco/data/batch_sampler.h"
#include "loco/util/torch_compat.h"

namespace loco {

EvalResult evaluate_batches(const BatchLoss& batch_loss, const data::TokenDataset& val, std::int64_t batches,
                            std::int64_t batch_size, std::int64_t seq_len, torch::Device device,
                            std::int64_t most_per_forward) {
  torch::NoGradGuard no_grad;
  data::BatchSampler sampler(val, seq_len, /*seed=*/0, /*replica=*/0, /*num_replicas=*/1, /*shuffle=*/false);
  std::int64_t asked = 0;  // batches · batch_size, which a huge --batches would overflow
  if (__builtin_mul_overflow(batches, batch_size, &asked)) asked = std::numeric_limits<std::int64_t>::max();
  const auto windows = std::min<std::int64_t>(asked, static_cast<std::int64_t>(sampler.windows_per_epoch()));
  double loss_sum = 0;  // summed per window, so a short last batch weighs what it holds
  for (std::int64_t done = 0; done < windows;) {
    const std::int64_t piece = most_per_forward > 0 ? std::min(most_per_forward, batch_size) : batch_size;
    const std::int64_t b = std::min(piece, windows - done);
    torch::Tensor inputs = torch::empty({b, seq_len}, torch::kInt64);
    torch::Tensor targets = torch::empty({b, seq_len}, torch::kInt64);
    sampler.next_batch(b, inputs.data_ptr<std::int64_t>(), targets.data_ptr<std::int64_t>());
    loss_sum += batch_loss(inputs.to(device), targets.to(device)) * static_cast<double>(b);
    done += b;
  }
  EvalResult result;
  result.tokens = windows * seq_len;
  result.loss = windows > 0 ? loss_sum / static_cast<double>(windows) : std::nan("");
  result.perplexity = std::exp(result.loss);
  return result;
}

EvalResult evaluate(Llama& model, const data::TokenDataset& val, std::int64_t batches, std::int64_t batch_size,
                    std::int64_t seq_len, torch::Device device, bool bf16_autocast, std::int64_t most_per_forward) {
  const BatchLoss batch_loss = [&](const torch::Tensor& inputs, const torch::Tensor& targets) {
    compat::CudaBf16Autocast autocast(bf16_autocast);
    return model->loss(inputs, targets).item<double>();
  };
  return evaluate_batches(batch_loss, val, batches, batch_size, seq_len, device, most_per_forward);
}

}  // namespace loco
