#include "loco/train/run_directory.h"

#include <fmt/format.h>

#include "loco/train/checkpoint.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace fs = std::filesystem;

fs::path replica_directory(const fs::path& out_dir, int rank) {
  return rank == 0 ? out_dir : out_dir / fmt::format("replica_{}", rank);
}

fs::path replica_checkpoint(const fs::path& checkpoint, int rank) {
  if (rank == 0) return checkpoint;
  const fs::path checkpoints = checkpoint.parent_path();
  return replica_directory(checkpoints.parent_path(), rank) / checkpoints.filename() / checkpoint.filename();
}

void claim_run_directory(const fs::path& dir, const fs::path& out_dir, bool resuming) {
  ensure_writable_directory(dir, "train.out_dir");
  if (resuming) return;
  const fs::path metrics = dir / "metrics.jsonl";
  const bool has_metrics = fs::exists(metrics) && fs::file_size(metrics) > 0;
  if (has_metrics || !list_checkpoints(dir / "checkpoints").empty()) {
    throw ConfigError(fmt::format(
        "train.out_dir '{}' already holds another run (checkpoints or metrics.jsonl); loco does not overwrite "
        "it. Pass --resume {}/checkpoints/step_N to continue that run, or choose another train.out_dir",
        out_dir.string(), out_dir.string()));
  }
}

}  // namespace loco
