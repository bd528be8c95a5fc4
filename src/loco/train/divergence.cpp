#include "loco/train/divergence.h"

#include <fmt/format.h>

#include "loco/model/weights.h"
#include "loco/train/checkpoint.h"

namespace loco {

namespace fs = std::filesystem;

std::string divergence_advice(double lr, const fs::path& out_dir, const std::optional<fs::path>& resumed_from) {
  const fs::path checkpoints = out_dir / "checkpoints";
  const bool checkpointed = !list_checkpoints(checkpoints).empty();
  const std::string restart = checkpointed   ? fmt::format("resume from the last checkpoint in {}", checkpoints.string())
                              : resumed_from ? fmt::format("resume from {} again", resumed_from->string())
                                             : std::string("start the run again (it wrote no checkpoint yet)");
  return fmt::format("Lower optim.lr (now {}) or raise optim.warmup_steps; {}", lr, restart);
}

std::optional<std::string> first_non_finite(const NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (!all_finite(tensor)) return name;
  }
  return std::nullopt;
}

}  // namespace loco
