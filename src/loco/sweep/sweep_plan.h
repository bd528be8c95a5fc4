// A sweep expanded into runs (docs/sweep.md): every combination of each grid's axes, named from its
// values, each run's config read, completed and checked as `loco train` would before anything starts, so
// that a bad key or value in any of them is an error up front. The file itself: sweep_file.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "loco/config/run_config.h"
#include "loco/sweep/sweep_file.h"

namespace loco {

// One run of the grid, or a repeat of a cell's best run.
struct SweepRun {
  std::string name;                                              // its directory below out_dir
  std::string cell;                                              // its grid and untuned axis values
  std::vector<std::pair<std::string, std::string>> axis_values;  // (axis, value) per axis, in axis order
  std::vector<std::string> overrides;                            // `key=value`: [set], then the axis values
  std::vector<std::pair<std::string, std::string>> unread_axes;  // (axis, why): axes its config does not read
  std::int64_t steps = 0;                                        // train.steps once the config is complete
  std::int64_t replicas = 1;   // dist.replicas (ranks under loco launch for gloo/nccl)
  bool launched = false;       // dist.backend gloo or nccl: started with loco launch
  std::string data_dir;        // data.dir, where the final evaluation reads
  std::string device = "cpu";  // train.device, where the final evaluation runs too
  std::string repeat_of;       // the run it repeats with other [best.repeat] values ("" for grid runs)
  // Its config as planned (planned_settings), kept with its result, so that a sweep run again after its file
  // changed trains a run anew when its config did.
  std::string settings;
};

// A run's config as a sweep compares it with its result's: to_json as JSON text, but train.out_dir (the run's
// directory) and train.threads (which --jobs sets).
std::string planned_settings(const RunConfig& config);

struct SweepPlan {
  std::filesystem::path file;  // the sweep file
  std::filesystem::path base;  // the base config, resolved against the sweep file's directory
  std::filesystem::path out_dir;
  int jobs = 1;
  int threads = 1;
  std::int64_t eval_batches = 200;
  std::int64_t eval_batch_size = 0;  // 0: each run's micro-batch
  std::vector<std::string> axes;     // the axis keys of every grid, in the file's order, then repeat keys
  std::vector<std::string> tuned;    // [best] tuned
  std::vector<SweepAxis> repeats;    // [best.repeat]
  std::vector<SweepRun> runs;        // every combination, grid by grid, the first axis varying slowest
};

// Reads and expands a sweep file (with `profile` applied); every run's config, and every repeat a run
// could have, is read, completed and checked as `loco train` would (a run that would fail at once fails
// here, naming it). ConfigError naming the file, the run and the fix: what read_sweep_file refuses, two
// runs with one name, a run whose config is refused.
SweepPlan read_sweep_plan(const std::filesystem::path& file, const std::string& profile = "");

// The runs that repeat `best` with every combination of the plan's [best.repeat] values (none without
// them), named `best.name` then `_LABEL-VALUE` per repeat key, with the repeat keys among their axis
// values.
std::vector<SweepRun> repeats_of(const SweepPlan& plan, const SweepRun& best);

}  // namespace loco
