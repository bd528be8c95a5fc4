#include "loco/sweep/sweep_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "loco/config/load_config.h"
#include "loco/config/strategy_checks.h"
#include "loco/config/unused_settings.h"
#include "loco/util/error.h"
#include "loco/util/utf8.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

// A piece of a directory name: letters, digits, '.', '+' and '-' kept, anything else '_'.
std::string name_piece(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-';
    if (!keep) c = '_';
  }
  return out;
}

// How each axis is named in run names: the key's last part ("outer_lr"), or the whole key with '-' for
// '.' where two axes share a last part (diloco.sync_every and noloco.sync_every).
std::vector<std::string> axis_labels(const std::vector<SweepAxis>& axes) {
  std::map<std::string, int> uses;
  const auto last_part = [](const std::string& key) { return key.substr(key.rfind('.') + 1); };
  for (const auto& axis : axes) ++uses[last_part(axis.key)];
  std::vector<std::string> labels;
  for (const auto& axis : axes) {
    std::string label = uses[last_part(axis.key)] > 1 ? axis.key : last_part(axis.key);
    std::replace(label.begin(), label.end(), '.', '-');
    labels.push_back(name_piece(label));
  }
  return labels;
}

// Calls `visit` with the value index of each axis for every combination, the last axis varying fastest
// (an odometer); once with no indices when there are no axes.
void for_each_combination(const std::vector<SweepAxis>& axes,
                          const std::function<void(const std::vector<std::size_t>&)>& visit) {
  std::vector<std::size_t> index(axes.size(), 0);
  while (true) {
    visit(index);
    std::size_t a = axes.size();
    while (a > 0 && ++index[a - 1] == axes[a - 1].values.size()) index[--a] = 0;
    if (a == 0) return;
  }
}

// "LABEL-VALUE" pieces joined by '_' after `prefix` (a grid's or a run's name).
std::string join_name(const std::string& prefix, const std::string& label, const std::string& value) {
  return prefix + (prefix.empty() ? "" : "_") + label + "-" + name_piece(value);
}

constexpr std::size_t kMaxRunNameBytes = 200;

void claim_name(std::set<std::string>& names, const std::string& name) {
  // "." and ".." name the sweep's directory and its parent: a run there would clear them as an earlier attempt.
  if (name.find_first_not_of('.') == std::string::npos) {
    throw ConfigError(fmt::format("a run would be named '{}', which is not a directory of its own: give the grid a "
                                  "name with a letter or digit",
                                  name));
  }
  // A run's name is a directory and, with a prefix and a pid, the name of files beside it: a component of more
  // than 255 bytes could not be made, and the sweep failed after its first runs trained.
  if (name.size() > kMaxRunNameBytes) {
    throw ConfigError(fmt::format("a run would be named '{}…' ({} bytes), too long for a file name (at most {}): "
                                  "give the grid a shorter name, or fewer or shorter axes' keys and values",
                                  utf8_prefix(name, 60), name.size(), kMaxRunNameBytes));
  }
  // The sweep's own files sit beside the runs' directories: NAME.log for each run, summary and cells tables as
  // .csv and .jsonl. A run named like one took its place (a run 'a.log' replaced run a's log).
  const fs::path extension = fs::path(name).extension();
  if (extension == ".log" || extension == ".csv" || extension == ".jsonl") {
    throw ConfigError(
        fmt::format("a run would be named '{}', which ends as the sweep's own files do (each run's "
                    "log NAME.log, the summary and cells tables as .csv and .jsonl): give the grid "
                    "another name",
                    name));
  }
  if (!names.insert(name).second) {
    throw ConfigError(fmt::format("two runs would share the directory '{}': make the axes' values (or the grids' "
                                  "names) differ in letters or digits",
                                  name));
  }
}

// Every combination of `grid`'s axes appended to the plan's runs.
void expand(SweepPlan& plan, const SweepGrid& grid, std::set<std::string>& names) {
  std::vector<std::string> fixed;
  for (const SweepAxis& s : grid.fixed) fixed.push_back(s.overrides.front().front());
  fixed.push_back("train.threads=" + std::to_string(plan.threads));
  const std::vector<std::string> labels = axis_labels(grid.axes);
  const std::string grid_name = name_piece(grid.name);
  for_each_combination(grid.axes, [&](const std::vector<std::size_t>& index) {
    SweepRun run;
    run.overrides = fixed;
    run.name = run.cell = grid_name;
    for (std::size_t a = 0; a < grid.axes.size(); ++a) {
      const SweepAxis& axis = grid.axes[a];
      const std::string& value = axis.values[index[a]];
      run.axis_values.emplace_back(axis.key, value);
      const auto& sets = axis.overrides[index[a]];
      run.overrides.insert(run.overrides.end(), sets.begin(), sets.end());
      run.name = join_name(run.name, labels[a], value);
      const bool tuned = std::find(plan.tuned.begin(), plan.tuned.end(), axis.key) != plan.tuned.end();
      if (!tuned) run.cell = join_name(run.cell, labels[a], value);
    }
    if (run.name.empty()) run.name = "run";
    if (run.cell.empty()) run.cell = "all";
    claim_name(names, run.name);
    run.overrides.push_back("train.out_dir=" + (plan.out_dir / run.name).string());
    plan.runs.push_back(std::move(run));
  });
}

}  // namespace

std::string planned_settings(const RunConfig& config) {
  nlohmann::json settings = to_json(config);
  settings.at("train").erase("out_dir");
  settings.at("train").erase("threads");
  return settings.dump();
}

namespace {

// Reads, completes and checks a run's config as `loco train` (or each rank under `loco launch`) would.
void check_run(const SweepPlan& plan, SweepRun& run) {
  try {
    RunConfig config = read_run_config(plan.base, run.overrides);
    require_comm_codec_used(config);
    run.launched = config.dist.backend == "gloo" || config.dist.backend == "nccl";
    if (run.launched && config.dist.replicas < 1) {
      throw ConfigError(fmt::format("dist.backend = \"{}\" runs one process per replica under loco launch: set "
                                    "dist.replicas (in [set] or an axis) to how many ranks to start",
                                    config.dist.backend));
    }
    complete_run_config(config, run.launched ? config.dist.replicas : 1);
    run.unread_axes.clear();
    for (const auto& [axis, value] : run.axis_values) {
      if (auto why = why_not_read(axis, config)) run.unread_axes.emplace_back(axis, *why);
    }
    run.settings = planned_settings(config);
    run.steps = config.train.steps;
    run.replicas = config.dist.replicas;
    run.data_dir = config.data.dir;
    run.device = config.train.device;
  } catch (const Error& e) {
    throw ConfigError(fmt::format("run {}: {}", run.name, e.what()));
  }
}

// An axis that no run of it reads trains the same run once per value (audit round 11: diloco.outer_lr over a
// Streaming sweep gave two runs of one loss, and said so only in each run's log).
void require_read_axes(const SweepPlan& plan) {
  for (const std::string& axis : plan.axes) {
    std::optional<std::string> why;
    bool read = false;
    std::set<std::string> values;  // an axis of one value repeats no run
    for (const SweepRun& run : plan.runs) {
      const auto value = std::find_if(run.axis_values.begin(), run.axis_values.end(),
                                      [&](const auto& entry) { return entry.first == axis; });
      if (value == run.axis_values.end()) continue;
      values.insert(value->second);
      const auto unread = std::find_if(run.unread_axes.begin(), run.unread_axes.end(),
                                       [&](const auto& entry) { return entry.first == axis; });
      if (unread == run.unread_axes.end()) read = true;
      if (unread != run.unread_axes.end() && !why) why = unread->second;
    }
    if (values.size() > 1 && !read) {
      throw ConfigError(
          fmt::format("the axis {} is read by none of its runs ({}): each of its values would train the "
                      "same run again. Remove the axis, or set what makes the runs read it",
                      axis, *why));
    }
  }
}

// Each run is a training process: a grid of millions is a slip of the keyboard, refused before its runs are
// listed (which would take minutes and gigabytes).
constexpr std::uint64_t kMostRuns = 10'000;

void require_few_enough_runs(const SweepFile& sweep) {
  std::uint64_t runs = 0;
  for (const SweepGrid& grid : sweep.grids) {
    std::uint64_t combinations = 1;
    for (const SweepAxis& axis : grid.axes) combinations = std::min(kMostRuns + 1, combinations * axis.values.size());
    runs = std::min(kMostRuns + 1, runs + combinations);
  }
  if (runs > kMostRuns) {
    throw ConfigError(fmt::format("the axes make more than {} runs (the product of their lengths, for each grid); "
                                  "a sweep that large is split into several files, or uses fewer values per axis",
                                  kMostRuns));
  }
}

// Repeats are runs too: each cell's best run trains again once per combination of [best.repeat]'s values. And
// any run may turn out its cell's best, so every run's repeats are checked before anything trains: that check
// is bounded as well (a million repeat combinations of two runs took minutes and gigabytes before this).
void require_few_enough_repeats(const SweepPlan& plan) {
  constexpr std::uint64_t kMostRepeatChecks = 20'000;  // about 3 s on one core
  if (plan.repeats.empty()) return;
  // Counted up to a bound far above both limits, so that the message can say how many there would be.
  constexpr std::uint64_t kCountUpTo = std::uint64_t{1} << 40;
  auto times = [](std::uint64_t a, std::uint64_t b) { return b != 0 && a > kCountUpTo / b ? kCountUpTo : a * b; };
  std::uint64_t combinations = 1;
  for (const SweepAxis& axis : plan.repeats) combinations = times(combinations, axis.values.size());
  std::set<std::string> cells;
  for (const SweepRun& run : plan.runs) cells.insert(run.cell);
  const std::uint64_t repeats = times(cells.size(), combinations);
  if (plan.runs.size() + repeats > kMostRuns) {
    throw ConfigError(fmt::format(
        "the axes and [best.repeat] make more than {} runs ({} grid runs, and {} repeats: {} cells, each best run "
        "repeated {} times); repeat fewer values, or split the sweep into several files",
        kMostRuns, plan.runs.size(), repeats, cells.size(), combinations));
  }
  const std::uint64_t checks = times(plan.runs.size(), combinations);
  if (checks > kMostRepeatChecks) {
    throw ConfigError(fmt::format(
        "{} grid runs with {} repeat combinations each make {} repeats to check before anything trains (any run "
        "may be its cell's best), more than {}; tune fewer values per cell, or repeat fewer values",
        plan.runs.size(), combinations, checks, kMostRepeatChecks));
  }
}

}  // namespace

std::vector<SweepRun> repeats_of(const SweepPlan& plan, const SweepRun& best) {
  std::vector<SweepRun> out;
  if (plan.repeats.empty()) return out;
  const std::vector<std::string> labels = axis_labels(plan.repeats);
  for_each_combination(plan.repeats, [&](const std::vector<std::size_t>& index) {
    SweepRun run = best;
    run.repeat_of = best.name;
    run.overrides.pop_back();  // train.out_dir, set again below
    for (std::size_t a = 0; a < plan.repeats.size(); ++a) {
      const SweepAxis& axis = plan.repeats[a];
      run.axis_values.emplace_back(axis.key, axis.values[index[a]]);
      run.overrides.push_back(axis.overrides[index[a]].front());
      run.name = join_name(run.name, labels[a], axis.values[index[a]]);
    }
    run.overrides.push_back("train.out_dir=" + (plan.out_dir / run.name).string());
    check_run(plan, run);  // its own config (and settings), not the best run's
    out.push_back(std::move(run));
  });
  return out;
}

SweepPlan read_sweep_plan(const fs::path& file, const std::string& profile) {
  const SweepFile sweep = read_sweep_file(file, profile);
  SweepPlan plan;
  plan.file = sweep.file;
  plan.base = sweep.base;
  plan.out_dir = sweep.out_dir;
  plan.jobs = sweep.jobs;
  plan.threads = sweep.threads;
  plan.eval_batches = sweep.eval_batches;
  plan.eval_batch_size = sweep.eval_batch_size;
  plan.tuned = sweep.tuned;
  plan.repeats = sweep.repeats;
  try {
    require_few_enough_runs(sweep);
    std::set<std::string> names;
    for (const SweepGrid& grid : sweep.grids) {
      for (const SweepAxis& axis : grid.axes) {
        if (std::find(plan.axes.begin(), plan.axes.end(), axis.key) == plan.axes.end()) plan.axes.push_back(axis.key);
      }
      expand(plan, grid, names);
    }
    require_few_enough_repeats(plan);
    for (const SweepAxis& repeat : plan.repeats) plan.axes.push_back(repeat.key);
    for (SweepRun& run : plan.runs) {
      check_run(plan, run);
      for (const SweepRun& repeat : repeats_of(plan, run)) claim_name(names, repeat.name);
    }
    require_read_axes(plan);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", file.string(), e.what()));
  }
  return plan;
}

}  // namespace loco
