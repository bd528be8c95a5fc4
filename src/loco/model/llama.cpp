#include "loco/model/llama.h"

#include <torch/torch.h>

#include "loco/util/error.h"

namespace loco {

DecoderImpl::DecoderImpl(const ModelConfig& c) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(DecoderLayer(c));
  norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& input_ids) {
  torch::Tensor h = embed_tokens(input_ids);  // (B, T, C)
  for (const auto& layer : *layers) h = layer->as<DecoderLayer>()->forward(h);
  return norm(h);
}

LlamaImpl::LlamaImpl(const ModelConfig& config) : config_(config) {
  LOCO_CHECK(config.vocab_size > 0, "vocab_size must be resolved before building the model");
  model = register_module("model", Decoder(config));
  if (!config.tie_word_embeddings) {
    lm_head = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.vocab_size).bias(false)));
  }
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& input_ids) {
  torch::Tensor h = model(input_ids);
  if (lm_head) return lm_head(h);
  return torch::matmul(h, model->embed_tokens->weight.t());
}

torch::Tensor LlamaImpl::loss(const torch::Tensor& input_ids, const torch::Tensor& targets) {
  torch::Tensor logits = forward(input_ids);  // (B, T, V)
  const std::int64_t vocab = logits.size(-1);
  // Cross-entropy in at least float32, whatever precision the logits came in.
  auto compute_type = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  return torch::nn::functional::cross_entropy(logits.reshape({-1, vocab}).to(compute_type),
                                              targets.reshape({-1}));
}

void LlamaImpl::init_weights() {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    if (name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0) {
      item.value().fill_(1.0);
    } else {
      item.value().normal_(0.0, config_.initializer_range);
    }
  }
}

std::int64_t LlamaImpl::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace loco
