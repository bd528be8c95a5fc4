#include "loco/train/divergence.h"

#include <fmt/format.h>

#include "loco/config/algorithms.h"
#include "loco/model/weights.h"
#include "loco/train/checkpoint.h"

namespace loco {

namespace fs = std::filesystem;

std::string where_to_start_again(const fs::path& run_dir, const fs::path& own_dir,
                                 const std::optional<fs::path>& resumed_from) {
  // A replica killed while writing its part of step_N left that step a checkpoint no resume can take (before:
  // named all the same).
  if (const auto whole = latest_whole_checkpoint(run_dir)) {
    return fmt::format("resume from the last checkpoint, {}", whole->string());
  }
  // This replica's parts where the run's own files are elsewhere (rank 0's, on another host: no config.toml here):
  // --resume names rank 0's checkpoint of a step this part has (before: "it wrote no checkpoint yet"). Where they
  // are here, the loop above had the last word.
  std::error_code unreadable;
  if (own_dir.lexically_normal() != run_dir.lexically_normal() && !fs::exists(run_dir / "config.toml", unreadable)) {
    const auto own = list_checkpoints(own_dir / "checkpoints");
    for (auto it = own.rbegin(); it != own.rend(); ++it) {
      if (!fs::exists(it->second / "state.json", unreadable)) continue;
      return fmt::format(
          "resume from the checkpoint of step {} in rank 0's train.out_dir ({}/checkpoints/{}), the "
          "latest this part wrote here ({})",
          it->first, run_dir.string(), it->second.filename().string(), it->second.string());
    }
  }
  if (resumed_from) return fmt::format("resume from {} again", resumed_from->string());
  return "start the run again (it wrote no checkpoint yet)";
}

namespace {

// The keys of the outer step that a divergence just after a synchronisation points to; "" without one.
std::string outer_step_keys(const RunConfig& c) {
  const Algorithm algorithm = algorithm_named(c.dist.algorithm);
  std::string keys;
  switch (algorithm) {
    case Algorithm::diloco:
      keys = fmt::format("diloco.outer_lr (now {})", c.diloco.outer_lr);
      break;
    case Algorithm::streaming:
      keys = fmt::format("streaming.outer_lr (now {})", c.streaming.outer_lr);
      break;
    case Algorithm::sparseloco:
      keys = fmt::format("sparseloco.outer_lr (now {})", c.sparseloco.outer_lr);
      break;
    case Algorithm::noloco:
      keys = fmt::format("noloco.beta and noloco.gamma (now {}, {})", c.noloco.beta, c.noloco.gamma);
      break;
    case Algorithm::localsgd:  // its outer step is an average, with no key to lower
    case Algorithm::none:
    case Algorithm::ddp:
      return "";
  }
  std::string advice = fmt::format("; if it diverged just after a synchronisation, lower {}", keys);
  if (c.dist.replicas > 1 && c.dist.aggregation == "mean" && algorithm != Algorithm::noloco) {
    advice += ", or take a robust dist.aggregation (clip, for one), in case a replica sent values that are not sound";
  }
  return advice;
}

}  // namespace

std::string divergence_advice(const RunConfig& config, const fs::path& run_dir, const fs::path& own_dir,
                              const std::optional<fs::path>& resumed_from) {
  return fmt::format("Lower optim.lr (now {}) or raise optim.warmup_steps{}; {}", config.optim.lr,
                     outer_step_keys(config), where_to_start_again(run_dir, own_dir, resumed_from));
}

std::optional<std::string> first_non_finite(const NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (!all_finite(tensor)) return name;
  }
  return std::nullopt;
}

}  // namespace loco
