// Which decoder layers each pipeline stage holds (docs/pipeline.md): contiguous blocks, in order; the first
// stage also holds the token embedding, the last the final norm and the output head (and with tied
// embeddings a copy of the embedding, kept equal by summing the two copies' gradients).
#pragma once

#include <string>
#include <vector>

#include "loco/config/run_config.h"

namespace loco::pipeline {

struct StageLayers {
  int first = 0;  // index of the stage's first decoder layer
  int count = 0;  // ≥ 1
  bool operator==(const StageLayers& other) const { return first == other.first && count == other.count; }
};

// The contiguous split of layer_cost.size() layers into `stages` blocks of at least one layer that makes the
// costliest stage as cheap as it can be, where a stage costs the sum of its layers' costs, plus first_extra
// on stage 0 and last_extra on the last stage (the embedding; the head and its loss). Costs are parameters
// or measured seconds. Of equally balanced splits, the one with the earliest boundaries. ConfigError when
// there are more stages than layers.
std::vector<StageLayers> balanced_partition(const std::vector<double>& layer_cost, int stages, double first_extra,
                                            double last_extra);

// A split as a user writes it: layers per stage, "3,4,4,3". ConfigError naming the key and the fix when the
// counts are not `stages` whole numbers ≥ 1 that add up to `layers`.
std::vector<StageLayers> parse_partition(const std::string& text, int layers, int stages);

// The split of a resolved model (vocabulary known) into `stages` that pipeline.partition asks for:
// "balanced" balances parameters (what each stage's memory holds: weights, gradients and AdamW's moments),
// the embedding counted on the first stage, the final norm and head (or the tied copy of the embedding)
// on the last; any other text is a list for parse_partition.
std::vector<StageLayers> model_partition(const ModelConfig& model, int stages, const std::string& partition);

}  // namespace loco::pipeline
