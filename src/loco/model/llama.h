// The Llama decoder with Hugging Face LlamaForCausalLM semantics and parameter names
// (docs/design.md §3 "Model"):
//   model.embed_tokens → model.layers.{i} (DecoderLayer) → model.norm → lm_head
// lm_head is absent when tie_word_embeddings: the logits then use model.embed_tokens.weight.
//
// A pipeline stage (docs/pipeline.md) builds the part of this model it holds (ModelPart): a block of
// decoder layers under their global names (model.layers.{i}), the embedding on the first stage, the
// final norm and head on the last; with tied embeddings the last stage also holds a copy of
// model.embed_tokens.weight for its head. Every parameter is initialised from the seed and its name
// alone (init_weights), so a stage draws the values the whole model would hold.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <vector>

#include "loco/config/run_config.h"
#include "loco/model/decoder_layer.h"

namespace loco {

// Which part of the model a module holds: decoder layers [first_layer, end_layer), and whether it takes
// token ids (the first stage: embeds them) and produces logits (the last: final norm and head).
struct ModelPart {
  std::int64_t first_layer = 0;
  std::int64_t end_layer = 0;
  bool takes_tokens = true;
  bool gives_logits = true;

  static ModelPart whole(const ModelConfig& config) { return {0, config.num_hidden_layers, true, true}; }
};

// Decoder layers registered under their global indices ("5", "6", …), so that a stage's parameter
// names are the whole model's.
class LayerBlockImpl : public torch::nn::Module {
 public:
  LayerBlockImpl(const ModelConfig& config, std::int64_t first, std::int64_t end);
  torch::Tensor forward(torch::Tensor hidden);
  std::size_t size() const { return layers_.size(); }

 private:
  std::vector<DecoderLayer> layers_;
};
TORCH_MODULE(LayerBlock);

class DecoderImpl : public torch::nn::Module {
 public:
  DecoderImpl(const ModelConfig& config, const ModelPart& part);
  // (B, T) token ids → (B, T, C) when the part takes tokens, else (B, T, C) → (B, T, C); normed when it
  // gives logits.
  torch::Tensor forward(const torch::Tensor& input);

  torch::nn::Embedding embed_tokens{nullptr};  // null on a stage that neither takes tokens nor ties its head to them
  LayerBlock layers{nullptr};
  RMSNorm norm{nullptr};  // null unless the part gives logits

 private:
  bool takes_tokens_;
};
TORCH_MODULE(Decoder);

class LlamaImpl : public torch::nn::Module {
 public:
  explicit LlamaImpl(const ModelConfig& config) : LlamaImpl(config, ModelPart::whole(config)) {}
  LlamaImpl(const ModelConfig& config, const ModelPart& part);

  // (B, T) token ids → logits (B, T, V) for the whole model; a part maps its input (token ids or the
  // previous stage's hidden states) to its output (hidden states, or logits on the last stage).
  torch::Tensor forward(const torch::Tensor& input);
  // Mean cross-entropy of the next-token predictions; targets (B, T) are already shifted. On a part
  // that gives logits. The head and the loss run in chunks of rows (head_loss.h): the logits of the
  // whole batch are never formed.
  torch::Tensor loss(const torch::Tensor& input, const torch::Tensor& targets);

  // HF initialisation: every Linear and Embedding weight ~ N(0, initializer_range²), norms = 1. Each
  // parameter draws from a generator seeded with `seed` and its name, so a part holds the values the
  // whole model holds, whichever parts are built.
  void init_weights(std::uint64_t seed);
  std::int64_t num_parameters() const;
  const ModelConfig& config() const { return config_; }
  const ModelPart& part() const { return part_; }

  Decoder model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tie_word_embeddings or not gives_logits

 private:
  ModelConfig config_;
  ModelPart part_;
};
TORCH_MODULE(Llama);

}  // namespace loco
