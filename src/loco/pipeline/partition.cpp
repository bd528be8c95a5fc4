#include "loco/pipeline/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "loco/util/error.h"
#include "loco/util/parse_number.h"

namespace loco::pipeline {

namespace {

void require_enough_layers(int layers, int stages) {
  if (stages < 1 || stages > layers) {
    throw ConfigError(fmt::format("dist.stages ({}) must lie between 1 and model.num_hidden_layers ({}): each stage "
                                  "holds at least one decoder layer",
                                  stages, layers));
  }
}

}  // namespace

std::vector<StageLayers> balanced_partition(const std::vector<double>& layer_cost, int stages, double first_extra,
                                            double last_extra) {
  const int layers = static_cast<int>(layer_cost.size());
  require_enough_layers(layers, stages);
  std::vector<double> prefix(layers + 1, 0);
  for (int l = 0; l < layers; ++l) prefix[l + 1] = prefix[l] + layer_cost[l];
  const auto cost = [&](int stage, int from, int to) {  // layers [from, to) on `stage`
    return prefix[to] - prefix[from] + (stage == 0 ? first_extra : 0) + (stage == stages - 1 ? last_extra : 0);
  };
  // best[s][l]: the smallest costliest stage when stages s.. hold layers l..; cut[s][l]: where stage s ends.
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(layers + 1, kNone));
  std::vector<std::vector<int>> cut(stages, std::vector<int>(layers + 1, -1));
  best[stages][layers] = 0;
  for (int s = stages - 1; s >= 0; --s) {
    const int stages_after = stages - 1 - s;
    for (int l = s; l + 1 + stages_after <= layers; ++l) {
      for (int end = l + 1; end + stages_after <= layers; ++end) {
        const double worst = std::max(cost(s, l, end), best[s + 1][end]);
        if (worst < best[s][l]) {  // strict: of equal splits, the earliest boundary
          best[s][l] = worst;
          cut[s][l] = end;
        }
      }
    }
  }
  std::vector<StageLayers> split;
  for (int s = 0, l = 0; s < stages; ++s) {
    const int end = cut[s][l];
    split.push_back({l, end - l});
    l = end;
  }
  return split;
}

std::vector<StageLayers> parse_partition(const std::string& text, int layers, int stages) {
  require_enough_layers(layers, stages);
  const auto bad = [&](const std::string& why) {
    std::vector<int> even;  // an example that fits: the layers dealt out as evenly as they go
    for (int s = 0; s < stages; ++s) even.push_back(layers / stages + (s < layers % stages ? 1 : 0));
    return ConfigError(fmt::format("pipeline.partition '{}' {}; give balanced, measured, or the decoder layers of "
                                   "each of the {} stages, separated by commas and adding up to "
                                   "model.num_hidden_layers ({}), e.g. '{}'",
                                   text, why, stages, layers, fmt::join(even, ",")));
  };
  std::vector<StageLayers> split;
  std::size_t at = 0;
  int first = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const auto count = parse_whole_number(text.substr(at, comma - at));
    if (!count || *count < 1 || *count > layers || *count != std::floor(*count)) throw bad("holds a count that is not a whole number of layers >= 1");
    split.push_back({first, static_cast<int>(*count)});
    first += static_cast<int>(*count);
    at = comma + 1;
  }
  if (static_cast<int>(split.size()) != stages) throw bad(fmt::format("names {} stages", split.size()));
  if (first != layers) throw bad(fmt::format("adds up to {} layers", first));
  return split;
}

std::vector<StageLayers> model_partition(const ModelConfig& m, int stages, const std::string& partition) {
  const int layers = static_cast<int>(m.num_hidden_layers);
  if (partition != "balanced") return parse_partition(partition, layers, stages);
  const double hidden = static_cast<double>(m.hidden_size);
  const double kv_width = static_cast<double>(m.num_key_value_heads * m.head_dim());
  // q and o (C x C), k and v (C x kv width), gate, up and down (C x I), two norms.
  const double layer = 2 * hidden * hidden + 2 * hidden * kv_width +
                       3 * hidden * static_cast<double>(m.intermediate_size) + 2 * hidden;
  const double embedding = static_cast<double>(m.vocab_size) * hidden;
  return balanced_partition(std::vector<double>(static_cast<std::size_t>(layers), layer), stages, embedding,
                            embedding + hidden);
}

}  // namespace loco::pipeline
