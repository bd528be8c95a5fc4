#include "loco/model/llama.h"

#include <torch/torch.h>

#include <string_view>

#include "loco/model/head_loss.h"
#include "loco/util/error.h"
#include "loco/util/portable_random.h"

namespace loco {

namespace {

// FNV-1a: a fixed 64-bit hash of a parameter's name, the stream of its initial values.
std::uint64_t name_stream(std::string_view name) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

LayerBlockImpl::LayerBlockImpl(const ModelConfig& config, std::int64_t first, std::int64_t end) {
  for (std::int64_t i = first; i < end; ++i) {
    layers_.push_back(register_module(std::to_string(i), DecoderLayer(config)));
  }
}

torch::Tensor LayerBlockImpl::forward(torch::Tensor hidden) {
  for (auto& layer : layers_) hidden = layer->forward(hidden);
  return hidden;
}

DecoderImpl::DecoderImpl(const ModelConfig& c, const ModelPart& part) : takes_tokens_(part.takes_tokens) {
  if (part.takes_tokens || (part.gives_logits && c.tie_word_embeddings)) {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  }
  layers = register_module("layers", LayerBlock(c, part.first_layer, part.end_layer));
  if (part.gives_logits) norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& input) {
  torch::Tensor h = layers(takes_tokens_ ? embed_tokens(input) : input);  // (B, T, C)
  return norm ? norm(h) : h;
}

LlamaImpl::LlamaImpl(const ModelConfig& config, const ModelPart& part) : config_(config), part_(part) {
  LOCO_CHECK(config.vocab_size > 0, "vocab_size must be resolved before building the model");
  LOCO_CHECK(part.first_layer >= 0 && part.first_layer <= part.end_layer && part.end_layer <= config.num_hidden_layers,
             "layers [{}, {}) of a model of {}", part.first_layer, part.end_layer, config.num_hidden_layers);
  model = register_module("model", Decoder(config, part));
  if (part.gives_logits && !config.tie_word_embeddings) {
    lm_head = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.vocab_size).bias(false)));
  }
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& input) {
  torch::Tensor h = model(input);
  if (!part_.gives_logits) return h;
  if (lm_head) return lm_head(h);
  return torch::matmul(h, model->embed_tokens->weight.t());
}

torch::Tensor LlamaImpl::loss(const torch::Tensor& input, const torch::Tensor& targets) {
  LOCO_CHECK(part_.gives_logits, "the loss of a model part without the head");
  const torch::Tensor hidden = model(input);  // (B, T, C), normed
  const torch::Tensor& head = lm_head ? lm_head->weight : model->embed_tokens->weight;
  return head_cross_entropy(hidden.reshape({-1, hidden.size(-1)}), head, targets.reshape({-1}));
}

void LlamaImpl::init_weights(std::uint64_t seed) {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    if (ends_with(name, "norm.weight")) {
      item.value().fill_(1.0);
      continue;
    }
    auto generator = at::detail::createCPUGenerator(mix_seed(seed, name_stream(name)));
    item.value().normal_(0.0, config_.initializer_range, generator);
  }
}

std::int64_t LlamaImpl::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace loco
