#include "loco/algo/evaluated_parameters.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "loco/algo/parameter_fragment.h"
#include "loco/config/algorithms.h"
#include "loco/model/weights.h"
#include "loco/pipeline/partition.h"
#include "loco/pipeline/stages/stage_runner.h"
#include "loco/train/inner_optimizer.h"
#include "loco/util/error.h"

namespace loco {

namespace {

// The fragments the strategy of `config` keeps its outer parameters in, each with its tensor's name in
// strategy.safetensors (algo/diloco_checkpoint.cpp, algo/noloco.cpp); none for an algorithm without them.
std::vector<std::pair<std::string, ParameterFragment>> outer_fragments(const RunConfig& config,
                                                                       const FlatParameters& layout,
                                                                       std::int64_t layers) {
  std::vector<std::pair<std::string, ParameterFragment>> named;
  switch (algorithm_named(config.dist.algorithm)) {
    case Algorithm::diloco:
    case Algorithm::localsgd:
    case Algorithm::sparseloco:
      named.emplace_back("outer/global", whole_model(layout));
      break;
    case Algorithm::noloco:
      named.emplace_back("outer/slow", whole_model(layout));
      break;
    case Algorithm::streaming: {
      const StreamingConfig& s = config.streaming;
      std::vector<ParameterFragment> fragments =
          block_fragments(layout, layers, s.fragments, s.assignment == "strided", s.embeddings_fragment);
      for (std::size_t p = 0; p < fragments.size(); ++p) {
        named.emplace_back(fmt::format("outer/{}/global", p), std::move(fragments[p]));
      }
      break;
    }
    case Algorithm::none:
    case Algorithm::ddp:
      break;
  }
  return named;
}

// Whether the strategy of `algorithm` keeps outer parameters that the run evaluates.
bool has_outer_parameters(Algorithm algorithm) { return algorithm != Algorithm::none && algorithm != Algorithm::ddp; }

// Overwrites `model`'s parameters (a checkpoint's θ, or a pipeline stage's part of it) with the ones its run
// evaluates, from the `strategy` tensors of its checkpoint; no change for an algorithm without outer parameters.
// CheckpointError when the strategy's tensors do not fit the model.
void use_evaluated_parameters(Llama& model, const RunConfig& config, const SafetensorsContent& strategy) {
  if (!has_outer_parameters(algorithm_named(config.dist.algorithm))) return;
  torch::NoGradGuard no_grad;
  // The parameters move into the layout's buffers (the old storage is freed as each moves), without gradients.
  const FlatParameters layout = optimizer_layout(model_parameters(model), /*with_gradients=*/false);
  for (auto& [name, fragment] : outer_fragments(config, layout, model->config().num_hidden_layers)) {
    const auto saved = strategy.tensors.find(name);
    if (saved == strategy.tensors.end() || saved->second.numel() != fragment.numel()) {
      throw CheckpointError(fmt::format(
          "{} has no {} of {} values, the {} parameters a {} run evaluates: it was edited, or written by another "
          "loco. Use another checkpoint",
          strategy.source.string(), name, fragment.numel(), fragment.name(), config.dist.algorithm));
    }
    fragment.write(saved->second.reshape({-1}));
  }
}

}  // namespace

Llama evaluated_model(const LoadedCheckpoint& checkpoint, torch::Device device) {
  Llama model = restore_model(checkpoint, device);
  const RunConfig& config = checkpoint.config;
  if (config.dist.stages == 1) {
    use_evaluated_parameters(model, config, checkpoint.strategy);
    return model;
  }
  if (!has_outer_parameters(algorithm_named(config.dist.algorithm))) return model;
  // Each stage kept the outer state of its part, laid out as that part's parameters: each part is built, given the
  // joined model's values, set to its evaluated ones, and those written back. A tied embedding's two copies (first
  // and last stage) are the same in both stages' outer states, as their θ copies are: checked, as those are.
  torch::NoGradGuard no_grad;
  const auto split =
      pipeline::model_partition(config.model, static_cast<int>(config.dist.stages), config.pipeline.partition);
  std::map<std::string, torch::Tensor> whole;
  for (const auto& [name, tensor] : model_parameters(model)) whole.emplace(name, tensor);
  std::set<std::string> written;
  for (std::size_t s = 0; s < checkpoint.stage_strategies.size(); ++s) {
    Llama part(config.model, pipeline::stage_part(split, static_cast<int>(s)));
    part->to(device);
    for (const auto& [name, tensor] : model_parameters(part)) tensor.copy_(whole.at(name));
    use_evaluated_parameters(part, config, checkpoint.stage_strategies[s]);
    for (const auto& [name, tensor] : model_parameters(part)) {
      if (!written.insert(name).second && !torch::equal(whole.at(name), tensor)) {
        throw CheckpointError(
            fmt::format("the stages of pipeline checkpoint {} hold different evaluated values of "
                        "{}, which they keep equal: a strategy.safetensors was edited. Use "
                        "another checkpoint",
                        checkpoint.dir.string(), name));
      }
      whole.at(name).copy_(tensor);
    }
  }
  return model;
}

}  // namespace loco
