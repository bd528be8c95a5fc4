#include "loco/train/run_directory.h"

#include <fmt/format.h>

#include <functional>
#include <string_view>

#include "loco/data/loco_made.h"
#include "loco/train/checkpoint.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kStagePrefix = "stage_";

// A checkpoint's counterpart in the directory that `mapped` makes of the directory holding its checkpoints/:
// DIR/checkpoints/step_N → mapped(DIR)/checkpoints/step_N.
fs::path counterpart(const fs::path& checkpoint, const std::function<fs::path(const fs::path&)>& mapped) {
  const fs::path checkpoints = checkpoint.parent_path();
  return mapped(checkpoints.parent_path()) / checkpoints.filename() / checkpoint.filename();
}

}  // namespace

fs::path replica_directory(const fs::path& out_dir, int rank) {
  return rank == 0 ? out_dir : out_dir / fmt::format("replica_{}", rank);
}

fs::path replica_checkpoint(const fs::path& checkpoint, int rank) {
  if (rank == 0) return checkpoint;
  return counterpart(checkpoint, [rank](const fs::path& dir) { return replica_directory(dir, rank); });
}

fs::path stage_directory(const fs::path& replica_dir, int stage) {
  return stage == 0 ? replica_dir : replica_dir / fmt::format("{}{}", kStagePrefix, stage);
}

fs::path stage_checkpoint(const fs::path& checkpoint, int stage) {
  if (stage == 0) return checkpoint;
  return counterpart(checkpoint, [stage](const fs::path& dir) { return stage_directory(dir, stage); });
}

fs::path first_stage_checkpoint(const fs::path& checkpoint) {
  const std::string holder = checkpoint.parent_path().parent_path().filename().string();
  if (holder.rfind(kStagePrefix, 0) != 0) return checkpoint;
  return counterpart(checkpoint, [](const fs::path& stage_dir) { return stage_dir.parent_path(); });
}

void refuse_data_and_checkpoint_directories(const fs::path& dir, std::string_view what) {
  std::error_code unresolved;
  fs::path start = fs::weakly_canonical(fs::absolute(dir), unresolved);
  if (unresolved) start = fs::absolute(dir).lexically_normal();
  for (fs::path at = start;; at = at.parent_path()) {
    if (const char* kind = data::loco_made(at)) {
      throw ConfigError(fmt::format("{} '{}' is {}{} ({}); loco never writes into a data directory or a checkpoint. "
                                    "Choose a directory outside it",
                                    what, dir.string(), at == start ? "" : "inside ", kind, at.string()));
    }
    // A run's checkpoints/ holds its checkpoints only: a directory put there (an export named step_N) would
    // be taken for one when the run is resumed, and files written into it (a run's own config.toml and
    // metrics.jsonl) are no checkpoint's.
    if (at == start && at.filename() == "checkpoints" && fs::exists(at.parent_path() / "config.toml", unresolved)) {
      throw ConfigError(fmt::format("{} '{}' is the checkpoints directory of the run in {}, where loco keeps that "
                                    "run's checkpoints only. Choose a directory outside it",
                                    what, dir.string(), at.parent_path().string()));
    }
    const fs::path holder = at.parent_path();
    if (holder.filename() == "checkpoints" && fs::exists(holder.parent_path() / "config.toml", unresolved)) {
      throw ConfigError(fmt::format("{} '{}' is {} the checkpoints directory of the run in {}, where loco keeps that "
                                    "run's checkpoints only (one put there would be taken for a checkpoint). Choose "
                                    "a directory outside it",
                                    what, dir.string(), at == start ? "in" : "inside", holder.parent_path().string()));
    }
    if (at == at.parent_path()) return;
  }
}

DirectoryLock claim_run_directory(const fs::path& dir, const fs::path& out_dir, bool resuming) {
  refuse_data_and_checkpoint_directories(dir, "train.out_dir");
  ensure_writable_directory(dir, "train.out_dir");
  DirectoryLock writing(dir, "train.out_dir");  // before its files are judged: a live run's are no stopped run's
  if (resuming) return writing;
  const fs::path metrics = dir / "metrics.jsonl";
  const bool has_metrics = fs::exists(metrics) && fs::file_size(metrics) > 0;
  const auto checkpoints = list_checkpoints(dir / "checkpoints");
  const bool has_checkpoints = !checkpoints.empty();
  if (has_metrics && !has_checkpoints) {
    throw ConfigError(fmt::format(
        "train.out_dir '{}' holds the metrics of a run that stopped before its first checkpoint: nothing of it can "
        "be resumed. Remove {} to start again there, or choose another train.out_dir",
        out_dir.string(), metrics.string()));
  }
  if (has_checkpoints) {
    throw ConfigError(fmt::format(
        "train.out_dir '{}' already holds another run's checkpoints; loco does not overwrite them. Pass --resume "
        "{} to continue that run, or choose another train.out_dir",
        out_dir.string(), (out_dir / "checkpoints" / checkpoints.back().second.filename()).string()));
  }
  return writing;
}

}  // namespace loco
