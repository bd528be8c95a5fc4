#include "loco/config/algorithms.h"

#include <fmt/format.h>

#include "loco/util/error.h"

namespace loco {

const std::vector<AlgorithmEntry>& algorithm_registry() {
  static const std::vector<AlgorithmEntry> entries = {
      {Algorithm::none, "none", "one replica, no communication"},
      {Algorithm::ddp, "ddp", "data parallel: gradients averaged every step"},
      {Algorithm::diloco, "diloco", "DiLoCo: outer Nesterov step every H inner steps"},
      {Algorithm::streaming, "streaming", "Streaming DiLoCo: fragments synced in turn, overlapped, quantised"},
      {Algorithm::noloco, "noloco", "NoLoCo: random pairs average, no collective"},
      {Algorithm::localsgd, "localsgd", "Local SGD: parameters averaged every H steps"},
      {Algorithm::sparseloco, "sparseloco",
       "SparseLoCo: every H steps, the top 1-3% of an error-feedback accumulator at 2 bits, all-gathered"},
  };
  return entries;
}

std::optional<Algorithm> find_algorithm(const std::string& name) {
  for (const auto& entry : algorithm_registry()) {
    if (name == entry.name) return entry.algorithm;
  }
  return std::nullopt;
}

Algorithm algorithm_named(const std::string& name) {
  if (const auto algorithm = find_algorithm(name)) return *algorithm;
  throw InternalError(fmt::format("dist.algorithm '{}' reached training without validation", name));
}

}  // namespace loco
