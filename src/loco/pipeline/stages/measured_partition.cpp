#include "loco/pipeline/stages/measured_partition.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "loco/model/llama.h"
#include "loco/pipeline/partition.h"
#include "loco/util/print_unchecked.h"

namespace loco::pipeline {

namespace {

constexpr int kWarmUps = 2;
constexpr int kRepeats = 5;

// The median seconds of `pass` over kRepeats runs after kWarmUps.
double median_seconds(const std::function<void()>& pass, torch::Device device) {
  std::vector<double> seconds;
  for (int run = 0; run < kWarmUps + kRepeats; ++run) {
    if (device.is_cuda()) torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    pass();
    if (device.is_cuda()) torch::cuda::synchronize();
    if (run >= kWarmUps) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + kRepeats / 2, seconds.end());
  return seconds[kRepeats / 2];
}

// Seconds of a forward and backward through one decoder layer, through the embedding, and through the
// final norm, head and loss: probes of one layer with and without each end, the layer's time taken out.
torch::Tensor time_model_parts(const RunConfig& config, torch::Device device) {
  const ModelConfig& shape = config.model;
  const std::int64_t batch = config.train.micro_batch_size, length = config.data.seq_len;
  torch::AutoGradMode with_gradients(true);
  // The timing does not care about the values: inputs of no random draw. (The probes' default module
  // initialisation draws from the global generator, which no result of loco reads: every draw that
  // matters has a generator of its own, as init_weights does.)
  const auto tokens = (torch::arange(batch * length, torch::kInt64) % shape.vocab_size).view({batch, length}).to(device);
  const auto hidden = torch::full({batch, length, shape.hidden_size}, 0.01, torch::TensorOptions().device(device));
  const auto probe = [&](bool takes_tokens, bool gives_logits) {
    Llama part(shape, ModelPart{0, 1, takes_tokens, gives_logits});
    part->init_weights(config.train.seed);
    part->to(device);
    return median_seconds(
        [&] {
          const torch::Tensor input = takes_tokens ? tokens : hidden.detach().requires_grad_(true);
          const torch::Tensor out = gives_logits ? part->loss(input, tokens) : part->forward(input).sum();
          out.backward();
          part->zero_grad();
        },
        device);
  };
  const double layer = probe(false, false);
  const double embedding = std::max(0.0, probe(true, false) - layer);
  const double head = std::max(0.0, probe(false, true) - layer);
  return torch::tensor({layer, embedding, head}, torch::kFloat64);
}

}  // namespace

std::string measured_partition(const RunConfig& config, comm::Group& pipeline, comm::Group* replicas,
                               torch::Device device) {
  const bool first_stage = pipeline.rank() == 0, first_replica = replicas == nullptr || replicas->rank() == 0;
  torch::Tensor seconds = torch::zeros({3}, torch::kFloat64);
  if (first_stage && first_replica) seconds = time_model_parts(config, device);
  if (first_stage && replicas != nullptr) {
    seconds = seconds.to(replicas->device());
    replicas->broadcast(seconds, 0);
  }
  seconds = seconds.to(pipeline.device());
  pipeline.broadcast(seconds, 0);
  seconds = seconds.cpu();
  const auto* s = seconds.data_ptr<double>();
  const std::vector<double> layers(static_cast<std::size_t>(config.model.num_hidden_layers), s[0]);
  std::vector<int> counts;
  for (const StageLayers& stage : balanced_partition(layers, pipeline.size(), s[1], s[2])) counts.push_back(stage.count);
  const std::string split = fmt::format("{}", fmt::join(counts, ","));
  if (first_stage && first_replica) {
    loco::print_unchecked(stderr,
                          "pipeline: partition measured: {:.2f} ms a decoder layer, {:.2f} ms the embedding, {:.2f} ms "
                          "the norm, head and loss per micro-batch: layers per stage {}\n",
                          1e3 * s[0], 1e3 * s[1], 1e3 * s[2], split);
  }
  return split;
}

}  // namespace loco::pipeline
