// What a run's replicas must hold in this machine's memory, estimated before anything is allocated
// (note "memory-need"). On the CPU an allocation rarely fails at once: memory is overcommitted, and a model
// or batch far beyond the machine grows until the kernel kills the process. So a run whose need is beyond
// the machine's memory is refused at start-up, naming what to lower. The estimate counts only what is
// certainly held at once, so that it never refuses a run that fits; a run just below the line may still
// run out (the out-of-memory error then says what to lower).
#pragma once

#include <cstdint>
#include <string>

#include "loco/config/run_config.h"

namespace loco {

struct MemoryNeed {
  std::int64_t parameters = 0;     // of one replica's part of the model
  double state_bytes = 0;          // weights, gradients and AdamW's two moments: 16 bytes per parameter
  // What the strategy keeps per parameter (float32): the outer step's global parameters, momentum and
  // pseudo-gradient (12 bytes: DiLoCo, Streaming, Local SGD, SparseLoCo, whose error feedback takes the momentum's
  // place), NoLoCo's momentum and its partner's parameters (8), data parallel's gradient buckets (4). Measured
  // (audit round 11): DiLoCo replicas as threads hold about 50 bytes per parameter in all; the rest (the
  // exchange's flat copies, the heap's freed buffers) is not counted, as it is not held at every moment.
  double strategy_bytes = 0;
  double activation_bytes = 0;     // what one micro-batch's forward keeps for its backward, float32
  double total_bytes(int replicas) const { return replicas * (state_bytes + strategy_bytes + activation_bytes); }
};

// The need of one replica holding layers [first_layer, end_layer) of `config`'s resolved model (vocabulary
// known), with the token embedding when `takes_tokens` and the head when `gives_logits`, training
// micro-batches of train.micro_batch_size sequences of data.seq_len tokens in float32. `keeps_attention_scores`:
// the attention keeps its softmax weights for backward (the math attention of libtorch before
// scaled_dot_product_attention; a fused kernel keeps one number per head and token instead).
MemoryNeed memory_need(const RunConfig& config, std::int64_t first_layer, std::int64_t end_layer, bool takes_tokens,
                       bool gives_logits, bool keeps_attention_scores);

// The memory this process may use: the machine's physical memory, or its control group's limit or its
// address-space limit (ulimit -v) when lower.
double usable_host_memory_bytes();

// ConfigError naming `command` when an address-space limit (ulimit -v) leaves no room for the BLAS library's
// buffers beside what the process maps already: OpenBLAS retries such an allocation without end.
void require_room_to_compute(const std::string& command);

// ConfigError when `replicas` replicas of `need` (threads of this process) exceed `available_bytes`.
void require_host_memory(const MemoryNeed& need, int replicas, double available_bytes);

}  // namespace loco
