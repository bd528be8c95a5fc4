// A run that diverged: its loss, or its weights after an update, no longer finite. It stops, writing no
// checkpoint of what it has (loco eval, generate, export and --resume refuse weights that are not finite, so
// such a checkpoint would stand in for the last good one), and says what to change and where to start again.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "loco/config/run_config.h"
#include "loco/io/safetensors.h"

namespace loco {

// Where a run that stopped short starts again: "resume from the last checkpoint, RUN_DIR/checkpoints/step_N"
// for the latest one whose parts in sight (RUN_DIR/replica_R, …/stage_S) are whole; else, where this part's
// directory `own_dir` is not the run's (a rank on another host), rank 0's checkpoint of the latest step it
// wrote; else the checkpoint the run resumed from; else "start the run again".
std::string where_to_start_again(const std::filesystem::path& run_dir, const std::filesystem::path& own_dir,
                                 const std::optional<std::filesystem::path>& resumed_from);

// "Lower optim.lr (now LR) or raise optim.warmup_steps", the outer step's keys of an algorithm that has one (a
// loss that diverges just after a synchronisation comes from there, or from a replica that sent bad values), and
// where_to_start_again.
std::string divergence_advice(const RunConfig& config, const std::filesystem::path& run_dir,
                              const std::filesystem::path& own_dir,
                              const std::optional<std::filesystem::path>& resumed_from);

// The name of the first tensor of `tensors` holding a NaN or an infinite value; nullopt when none does.
std::optional<std::string> first_non_finite(const NamedTensors& tensors);

}  // namespace loco
