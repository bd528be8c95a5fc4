// The language-model head and its loss in one: the mean cross-entropy of logits = hidden · weightᵀ
// against the targets,
//   loss = (1/N) Σₙ [logsumexp_v(logitsₙ) − logitsₙ,targetₙ],
// computed over chunks of rows so that the logits of the whole batch never exist at once. With the
// gradient wanted, each chunk's gradient is computed while its logits are at hand:
//   ∂loss/∂logitsₙ = (softmax(logitsₙ) − onehot(targetₙ)) / N,
//   ∂loss/∂hidden = ∂loss/∂logits · weight,   ∂loss/∂weight = (∂loss/∂logits)ᵀ · hidden,
// and backward only scales them by the incoming gradient.
//
// Why: the plain form's forward makes the (N, V) logits, their float32 copy and the log-softmax, and
// keeps the log-softmax for backward: at N = 32 × 1024 tokens and V = 32000, 2 GB of bf16 and 8 GB of
// float32 at its peak, 4 GB held from forward to backward per micro-batch. Chunked, a chunk's logits
// (a bounded number of them, below) are the only (rows, V) tensors alive, and what is held for
// backward is the gradients, the size of the hidden states and of the weight.
#pragma once

#include <torch/types.h>

namespace loco {

// Logits per chunk. On a GPU 2²⁷ (512 MiB in float32): big enough that a chunk's dozen kernels are a
// few launches per micro-batch, small enough that the transient memory stays bounded whatever the
// vocabulary and batch. On a CPU 2²⁴: no slower there than one chunk of 2²⁷, and less memory
// (bench/head_loss_bench.cpp with --chunk-rows; docs/results.md "Issue 40 on the CPU").
inline constexpr std::int64_t kHeadLossChunkLogitsCuda = std::int64_t{1} << 27;
inline constexpr std::int64_t kHeadLossChunkLogitsCpu = std::int64_t{1} << 24;

// hidden (N, C), weight (V, C), targets (N) int64 in [0, V). The logits are computed in the dtype the
// matmul gives (bf16 under autocast) and the softmax in at least float32, as the plain form's
// cross_entropy(logits.float()) does. chunk_rows ≤ 0 picks kHeadLossChunkLogits{Cuda,Cpu} / V rows.
torch::Tensor head_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                                 std::int64_t chunk_rows = 0);

}  // namespace loco
