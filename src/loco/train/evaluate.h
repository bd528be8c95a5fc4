// Validation loss: the first windows of the validation split, in order, so every evaluation of a
// run (and `loco eval` on its checkpoints) sees the same tokens.
#pragma once

#include <cstdint>
#include <functional>

#include "loco/data/token_dataset.h"
#include "loco/model/llama.h"

namespace loco {

struct EvalResult {
  double loss = 0;
  double perplexity = 0;
  std::int64_t tokens = 0;
};

// The mean loss of one batch: (B, T) token ids and targets on the model's device.
using BatchLoss = std::function<double(const torch::Tensor& inputs, const torch::Tensor& targets)>;

// Mean loss over min(batches·batch_size, windows in the split) windows of seq_len tokens, a batch at a time,
// each batch's forward in pieces of at most `most_per_forward` windows (0: whole batches), so that a large
// batch needs no more memory than the pieces.
EvalResult evaluate_batches(const BatchLoss& batch_loss, const data::TokenDataset& val, std::int64_t batches,
                            std::int64_t batch_size, std::int64_t seq_len, torch::Device device,
                            std::int64_t most_per_forward = 0);

// The same for a whole model. With `bf16_autocast` (CUDA only) the forward pass runs under bf16 autocast,
// as training does.
EvalResult evaluate(Llama& model, const data::TokenDataset& val, std::int64_t batches, std::int64_t batch_size,
                    std::int64_t seq_len, torch::Device device, bool bf16_autocast = false,
                    std::int64_t most_per_forward = 0);

}  // namespace loco
