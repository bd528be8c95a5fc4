// Advice before a run: outer Nesterov momentum 0.9 (the papers' default) where loco's fidelity study
// measured DiLoCo losing to data parallel by more than the seed noise (docs/scaling-study.md, "Where DiLoCo
// loses to data parallel"). The region is the box the study covered, no wider: models of 55K to 632K
// non-embedding parameters, global batches of 1K to 32K tokens per step, runs of 5 to 82 outer steps.
// Outside it loco says nothing: the papers' regime (hundreds of outer steps, large models and batches) is
// where 0.9 was tuned, and smaller runs were not measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loco/config/run_config.h"

namespace loco::sim {

inline constexpr double kSmallestMeasuredNonEmbedding = 55'536;   // size s of the scaling study
inline constexpr double kLargestMeasuredNonEmbedding = 631'792;   // size l
inline constexpr std::int64_t kSmallestMeasuredBatchTokens = 1'024;  // 8 sequences of 128 tokens
inline constexpr std::int64_t kLargestMeasuredBatchTokens = 32'768;  // 256 sequences of 128 tokens
inline constexpr std::int64_t kFewestMeasuredOuterSteps = 5;          // the H100 diagnostics' H = 100
inline constexpr std::int64_t kMostMeasuredOuterSteps = 82;           // batch 32 at H = 4
inline constexpr double kMeasuredLosingMomentum = 0.9;

// The warning for a completed config (config/load_config.h), or nothing: DiLoCo or Streaming DiLoCo with
// outer momentum >= 0.9 inside the measured box.
std::optional<std::string> outer_momentum_warning(const RunConfig& config);

}  // namespace loco::sim
