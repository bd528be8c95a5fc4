// What a sweep file says (docs/sweep.md), read and checked for its own mistakes, before any run's config
// is built (sweep_plan.h expands it into runs).
//
//   base = "configs/tiny.toml"       # the config every run starts from (relative to this file)
//   out_dir = "runs/eta"             # one directory per run below it (relative to the working directory)
//   jobs = 2                         # runs at a time (loco sweep --jobs overrides it)
//   threads = 1                      # train.threads of every run
//   [eval]                           # the final evaluation of every run (loco eval)
//   batches = 200
//   batch_size = 16
//   [set]                            # overrides every run gets
//   "train.steps" = 400
//   [axes]                           # the grid: every combination of these values (first axis slowest)
//   "diloco.outer_lr" = [0.3, 0.5, 0.7]
//   size = [{name = "s", "model.hidden_size" = 64, "train.tokens" = 300000},   # a compound axis: each
//           {name = "m", "model.hidden_size" = 128, "train.tokens" = 900000}]  # value sets several keys
//
//   [[grid]]                         # optional: several grids, each with the file's [set] and [axes]
//   name = "dp"                      #   and its own (its name starts its runs' names)
//   [grid.set]
//   "dist.algorithm" = "ddp"
//
//   [best]                           # optional: the axes tuned in each cell (a grid and the values of its
//   tuned = ["diloco.outer_lr"]      #   other axes); the best run of each cell is run again with each
//   [best.repeat]                    #   value of the repeat keys
//   "train.seed" = [1, 2]
//
//   [profile.gpu]                    # loco sweep --profile gpu: out_dir, jobs, threads, [eval], [set] and
//   threads = 0                      #   [axes] replaced key by key (an axis the file does not have is an
//   [profile.gpu.axes]               #   error); [[profile.gpu.grid]] tables, when there are some, replace
//   size = [...]                     #   the file's grids
//
// Keys are `section.key` of the run config, written quoted or as nested tables ([axes.diloco] outer_lr =
// [...]); a compound axis's name has no '.'. Pure parsing: no run config is read here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace loco {

// One axis (or, with a single value, one fixed setting): its values as they name runs, and the
// `key=value` overrides each value stands for (one for a plain axis, several for a compound one).
struct SweepAxis {
  std::string key;                                  // a config key, or a compound axis's name
  std::vector<std::string> values;                  // as written (a compound value's name)
  std::vector<std::vector<std::string>> overrides;  // per value: `key=value` for loco train --set
};

struct SweepGrid {
  std::string name;  // "" for the file's own grid
  std::vector<SweepAxis> fixed;
  std::vector<SweepAxis> axes;
};

// Runs at a time: each is a training process, and more than a thousand at once is a slip of the keyboard
// (a jobs of 2^31 wrapped to a negative count and ran nothing).
inline constexpr int kMaxSweepJobs = 1024;

struct SweepFile {
  std::filesystem::path file;
  std::filesystem::path base;  // resolved against the sweep file's directory
  std::filesystem::path out_dir;
  int jobs = 1;
  int threads = 1;
  std::int64_t eval_batches = 200;
  std::int64_t eval_batch_size = 0;  // 0: each run's micro-batch
  std::vector<SweepGrid> grids;
  std::vector<std::string> tuned;    // [best] tuned: axis keys
  std::vector<SweepAxis> repeats;    // [best.repeat]: plain keys, their values
};

// Reads `file`, with profile `profile` applied when not empty. ConfigError naming the file, the key and
// the fix: an unknown key, an axis without values, a value of the wrong kind, a reserved key
// (train.out_dir, train.threads), a tuned key that is not an axis, a repeat key that is one, a profile
// the file does not have or one that replaces an axis the file does not have.
SweepFile read_sweep_file(const std::filesystem::path& file, const std::string& profile = "");

}  // namespace loco
