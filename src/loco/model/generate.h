// Sampling text from a model: temperature and top-k over the last position's logits, one token at
// a time, the context cropped to the model's max_position_embeddings.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "loco/model/llama.h"

namespace loco {

struct SamplingOptions {
  std::int64_t max_new_tokens = 100;
  double temperature = 0.8;  // 0: greedy
  std::int64_t top_k = 40;   // 0: the whole vocabulary
  std::uint64_t seed = 0;
  std::int64_t stop_token = -1;  // generation ends after this token (EOS); −1: never
  // Ids at and above this are never drawn (the tokenizer's vocabulary, when the model's embedding is larger:
  // model.vocab_size above the data's); 0: the model's whole vocabulary.
  std::int64_t vocabulary = 0;
};

// Returns only the new tokens; `on_token`, when given, sees them after each one (to show the text as it comes).
std::vector<std::int64_t> generate_tokens(Llama& model, const std::vector<std::int64_t>& prompt,
                                          const SamplingOptions& options, torch::Device device,
                                          const std::function<void(const std::vector<std::int64_t>&)>& on_token = {});

}  // namespace loco
