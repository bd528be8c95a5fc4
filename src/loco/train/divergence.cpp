#include "loco/train/divergence.h"

#include <fmt/format.h>

#include "loco/model/weights.h"
#include "loco/train/checkpoint.h"

namespace loco {

namespace fs = std::filesystem;

std::string where_to_start_again(const fs::path& out_dir, const std::optional<fs::path>& resumed_from) {
  const fs::path checkpoints = out_dir / "checkpoints";
  const auto found = list_checkpoints(checkpoints);
  if (!found.empty()) return fmt::format("resume from the last checkpoint, {}", found.back().second.string());
  if (resumed_from) return fmt::format("resume from {} again", resumed_from->string());
  return "start the run again (it wrote no checkpoint yet)";
}

std::string divergence_advice(double lr, const fs::path& out_dir, const std::optional<fs::path>& resumed_from) {
  return fmt::format("Lower optim.lr (now {}) or raise optim.warmup_steps; {}", lr,
                     where_to_start_again(out_dir, resumed_from));
}

std::optional<std::string> first_non_finite(const NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (!all_finite(tensor)) return name;
  }
  return std::nullopt;
}

}  // namespace loco
