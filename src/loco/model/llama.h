// The Llama decoder with Hugging Face LlamaForCausalLM semantics and parameter names
// (docs/design.md §3 "Model"):
//   model.embed_tokens → model.layers.{i} (DecoderLayer) → model.norm → lm_head
// lm_head is absent when tie_word_embeddings: the logits then use model.embed_tokens.weight.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "loco/config/run_config.h"
#include "loco/model/decoder_layer.h"

namespace loco {

class DecoderImpl : public torch::nn::Module {
 public:
  explicit DecoderImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& input_ids);  // (B, T) → hidden (B, T, C)

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
};
TORCH_MODULE(Decoder);

class LlamaImpl : public torch::nn::Module {
 public:
  explicit LlamaImpl(const ModelConfig& config);

  torch::Tensor forward(const torch::Tensor& input_ids);  // (B, T) → logits (B, T, V)
  // Mean cross-entropy of the next-token predictions; targets (B, T) are already shifted.
  torch::Tensor loss(const torch::Tensor& input_ids, const torch::Tensor& targets);

  // HF initialisation: every Linear and Embedding weight ~ N(0, initializer_range²), norms = 1.
  void init_weights();
  std::int64_t num_parameters() const;
  const ModelConfig& config() const { return config_; }

  Decoder model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tie_word_embeddings

 private:
  ModelConfig config_;
};
TORCH_MODULE(Llama);

}  // namespace loco
