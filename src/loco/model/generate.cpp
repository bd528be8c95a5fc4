#include "loco/model/generate.h"

#include <torch/torch.h>

#include "loco/util/error.h"

namespace loco {

std::vector<std::int64_t> generate_tokens(Llama& model, const std::vector<std::int64_t>& prompt,
                                          const SamplingOptions& options, torch::Device device,
                                          const std::function<void(const std::vector<std::int64_t>&)>& on_token) {
  LOCO_CHECK(!prompt.empty(), "generation needs at least one prompt token (BOS)");
  torch::NoGradGuard no_grad;
  model->eval();
  auto generator = torch::make_generator<at::CPUGeneratorImpl>(options.seed);
  const auto window = model->config().max_position_embeddings;
  std::vector<std::int64_t> context = prompt;
  std::vector<std::int64_t> produced;
  for (std::int64_t i = 0; i < options.max_new_tokens; ++i) {
    const auto begin = static_cast<std::int64_t>(context.size()) > window ? context.end() - window : context.begin();
    std::vector<std::int64_t> visible(begin, context.end());
    torch::Tensor ids = torch::tensor(visible, torch::kInt64).unsqueeze(0).to(device);  // (1, T)
    torch::Tensor logits = model->forward(ids).select(1, -1).squeeze(0).to(torch::kCPU).to(torch::kFloat32);  // (V)
    if (options.vocabulary > 0 && options.vocabulary < logits.size(0)) logits = logits.narrow(0, 0, options.vocabulary);
    std::int64_t next;
    if (options.temperature <= 0) {
      next = logits.argmax().item<std::int64_t>();
    } else {
      // In double and shifted so that the largest is 0: divided by a tiny temperature, raw logits overflow to
      // inf, and in float32 a temperature below 1e-45 is 0 (the largest logit would become 0/0).
      logits = logits.to(torch::kFloat64);
      logits = (logits - logits.max()) / options.temperature;
      if (options.top_k > 0 && options.top_k < logits.size(0)) {
        const double kth = std::get<0>(logits.topk(options.top_k)).index({-1}).item<double>();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
      }
      torch::Tensor probs = torch::softmax(logits, -1);
      next = torch::multinomial(probs, 1, false, generator).item<std::int64_t>();
    }
    produced.push_back(next);
    context.push_back(next);
    if (on_token) on_token(produced);
    if (next == options.stop_token) break;
  }
  return produced;
}

}  // namespace loco
