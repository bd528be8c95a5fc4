// What a simulated bad replica (config/adversary.h, `dist.adversary`) does to its pseudo-gradient before
// the exchange, to study how the aggregation rules (robust_aggregation.h) withstand it.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "loco/config/adversary.h"

namespace loco {

// `delta`, the pseudo-gradient replica `rank` sends for the outer step after step `step`, as the adversary
// makes it: F·Δ, Gaussian noise of Δ's norm seeded by (`seed`, step), or NaN; unchanged for other replicas
// and earlier steps. Elastic members pass the spec's own replica as `rank` (only the adversary holds one).
void corrupt_pseudo_gradient(const std::optional<AdversarySpec>& adversary, torch::Tensor& delta, int rank,
                             std::int64_t step, std::uint64_t seed);

// For logs: "" without one, else " adversary=replica R from step S: scale=F" (or ": noise").
std::string describe_adversary(const std::optional<AdversarySpec>& adversary);

}  // namespace loco
