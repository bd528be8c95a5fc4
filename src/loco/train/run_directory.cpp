#include "loco/train/run_directory.h"

#include <fmt/format.h>

#include <climits>
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
  const fs::path at = checkpoint_location(checkpoint);
  const fs::path checkpoints = at.parent_path();
  return mapped(checkpoints.parent_path()) / checkpoints.filename() / at.filename();
}

}  // namespace

fs::path checkpoint_location(const fs::path& checkpoint) {
  const auto normal = [](fs::path path) {
    path = path.lexically_normal();
    return path.has_filename() ? path : path.parent_path();
  };
  fs::path at = normal(fs::absolute(checkpoint));
  // A link in the directories above stays: the run's other parts are beside the path as given.
  std::error_code error;
  for (int hops = 0; hops < 8 && fs::is_symlink(at, error); ++hops) {
    const fs::path target = fs::read_symlink(at, error);
    if (error) break;
    at = normal(target.is_absolute() ? target : at.parent_path() / target);
  }
  return at;
}

std::optional<fs::path> run_directory_of(const fs::path& checkpoint, bool elastic) {
  const fs::path checkpoints = checkpoint_location(checkpoint).parent_path();
  if (checkpoints.filename() != "checkpoints") return std::nullopt;
  const fs::path holder = checkpoints.parent_path();
  if (!elastic) return holder;
  if (holder.parent_path().filename() != "members") return std::nullopt;
  return holder.parent_path().parent_path();
}

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
  const std::string holder = checkpoint_location(checkpoint).parent_path().parent_path().filename().string();
  if (holder.rfind(kStagePrefix, 0) != 0) return checkpoint;
  return counterpart(checkpoint, [](const fs::path& stage_dir) { return stage_dir.parent_path(); });
}

namespace {

// `dir` as the directories above it are walked from: absolute, its links resolved where they exist, without a
// trailing separator ("RUN/checkpoints/" is RUN/checkpoints).
fs::path walk_start(const fs::path& dir) {
  std::error_code unresolved;
  fs::path start = fs::weakly_canonical(fs::absolute(dir), unresolved);
  if (unresolved) start = fs::absolute(dir).lexically_normal();
  return without_trailing_separator(start);
}

}  // namespace

void refuse_data_and_checkpoint_directories(const fs::path& dir, std::string_view what) {
  std::error_code unresolved;
  const fs::path start = walk_start(dir);
  for (fs::path at = start;; at = at.parent_path()) {
    if (const char* kind = data::loco_made(at)) {
      throw ConfigError(fmt::format("{} '{}' is {}{} ({}); loco never writes into a data directory or a checkpoint. "
                                    "Choose a directory outside it",
                                    what, dir.string(), at == start ? "" : "inside ", kind, at.string()));
    }
    // A run's checkpoints/ holds its checkpoints only: a directory put there (an export named step_N) would
    // be taken for one when the run is resumed, and files written into it (a run's own config.toml and
    // metrics.jsonl) are no checkpoint's.
    if (at == start && at.filename() == "checkpoints" && fs::exists(at.parent_path() / "config.toml", unresolved) &&
        fs::exists(at.parent_path() / "metrics.jsonl", unresolved)) {
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

void refuse_run_directories(const fs::path& dir, std::string_view what) {
  std::error_code unresolved;
  const fs::path start = walk_start(dir);
  for (fs::path at = start;; at = at.parent_path()) {
    // A run's directory holds its config.toml and metrics.jsonl; a sweep's run its result (sweep/sweep_runner.h).
    const bool run = (fs::exists(at / "config.toml", unresolved) && fs::exists(at / "metrics.jsonl", unresolved)) ||
                     fs::exists(at / "sweep_result.json", unresolved);
    if (run) {
      throw ConfigError(
          fmt::format("{} '{}' is {}the directory of a run ({}): the sweep's runs and tables would be "
                      "mixed with its files, and lost when it is trained again. Choose a directory "
                      "outside it",
                      what, dir.string(), at == start ? "" : "inside ", at.string()));
    }
    if (at == at.parent_path()) return;
  }
}

namespace {

// A directory named like a checkpoint without its state.json (a copy cut short) would pass for one: a resume
// counted it as the run's latest, and a fresh run named it as the one to resume.
void refuse_incomplete_checkpoints(const fs::path& checkpoints_dir) {
  for (const auto& [step, path] : list_checkpoints(checkpoints_dir)) {
    if (!fs::exists(path / "state.json")) {
      throw ConfigError(fmt::format("{} is named like a checkpoint but holds no state.json (a copy or move cut "
                                    "short?); loco takes it for none. Remove it, or copy the checkpoint again whole",
                                    path.string()));
    }
  }
}

// The longest path a run writes below its directory: a checkpoint's file as it is written,
// checkpoints/.step_N.partial-PID/.optimizer.safetensors.tmp-PID with a 19-digit step and 10-digit pids, rounded up.
constexpr std::size_t kLongestPathBelowARun = 128;

// A directory whose checkpoints' paths the system refuses (PATH_MAX) trained until its first checkpoint, then
// failed with "File name too long", its metrics left blocking the start again that the message advised.
void refuse_paths_too_long_for_checkpoints(const fs::path& dir) {
  const std::size_t length = fs::absolute(dir).string().size();
  if (length + kLongestPathBelowARun < PATH_MAX) return;
  throw ConfigError(
      fmt::format("train.out_dir '{}' is a path of {} characters, and the checkpoints written below it "
                  "would pass the {} a path may have (PATH_MAX): choose a shorter train.out_dir (at most "
                  "{} characters)",
                  dir.string(), length, PATH_MAX, PATH_MAX - kLongestPathBelowARun - 1));
}

}  // namespace

DirectoryLock claim_run_directory(const fs::path& dir, const fs::path& out_dir,
                                  const std::optional<fs::path>& resumed_from) {
  refuse_data_and_checkpoint_directories(dir, "train.out_dir");
  refuse_paths_too_long_for_checkpoints(dir);
  ensure_writable_directory(dir, "train.out_dir");
  DirectoryLock writing(dir, "train.out_dir");  // before its files are judged: a live run's are no stopped run's
  refuse_incomplete_checkpoints(dir / "checkpoints");
  if (resumed_from) {
    // Resumed into the directory of another run that has checkpoints, the two runs' checkpoints, config.toml
    // and metrics.jsonl were mixed, and neither could be resumed again.
    const auto theirs = list_checkpoints(out_dir / "checkpoints");
    std::error_code unresolved;
    // Resolved first: `--resume step_6` inside checkpoints/, or a link to a checkpoint, name it differently.
    const fs::path from = fs::weakly_canonical(fs::absolute(*resumed_from), unresolved);
    if (!theirs.empty() && !unresolved && !fs::equivalent(from.parent_path(), out_dir / "checkpoints", unresolved)) {
      throw ConfigError(fmt::format(
          "train.out_dir '{}' holds the checkpoints of another run (the latest {}), and {} is not one of them: "
          "resumed there, the two runs would be mixed. Pass a new train.out_dir (--set train.out_dir=…), or resume "
          "from a checkpoint of that run",
          out_dir.string(), theirs.back().second.string(), resumed_from->string()));
    }
    return writing;
  }
  const auto checkpoints = list_checkpoints(dir / "checkpoints");
  if (!checkpoints.empty()) {
    // A replica's or stage's own directory (replica_r, stage_s) names the run's checkpoint, which --resume takes:
    // the first replica's, when it has this one. A run killed while its replicas wrote their first checkpoint
    // left one replica's only: nothing of it can be resumed.
    const fs::path latest = checkpoints.back().second;
    const fs::path run_checkpoint = out_dir / "checkpoints" / latest.filename();
    const std::string name = dir.filename().string();
    const bool part = name.rfind("replica_", 0) == 0 || name.rfind(kStagePrefix, 0) == 0;
    std::error_code unreadable;
    if (part && !fs::exists(run_checkpoint / "state.json", unreadable)) {
      throw ConfigError(fmt::format(
          "train.out_dir '{}' holds {}, a part of a checkpoint whose other parts are missing ({} is not there): the "
          "run stopped while writing it, and it cannot be resumed. Remove {} to start again there, or choose "
          "another train.out_dir",
          out_dir.string(), latest.string(), run_checkpoint.string(), (dir / "checkpoints").string()));
    }
    // Elsewhere (an elastic member's own directory) the checkpoint is the member's.
    const bool of_run = part || dir.lexically_normal() == out_dir.lexically_normal();
    throw ConfigError(fmt::format(
        "train.out_dir '{}' already holds another run's checkpoints; loco does not overwrite them. Pass --resume "
        "{} to continue that run, or choose another train.out_dir",
        out_dir.string(), (of_run ? run_checkpoint : latest).string()));
  }
  const fs::path metrics = dir / "metrics.jsonl";
  if (fs::exists(metrics) && fs::file_size(metrics) > 0) {
    throw ConfigError(fmt::format(
        "train.out_dir '{}' holds the metrics of a run that stopped before its first checkpoint: nothing of it can "
        "be resumed. Remove {} to start again there, or choose another train.out_dir",
        out_dir.string(), metrics.string()));
  }
  return writing;
}

}  // namespace loco
