#include "loco/sweep/sweep_runner.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "loco/config/load_config.h"
#include "loco/sim/model_size.h"
#include "loco/sweep/sweep_cells.h"
#include "loco/util/directory_lock.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/json_difference.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/run_program.h"
#include "loco/util/turn_lock.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

constexpr const char* kResultFile = "sweep_result.json";

// The metrics a result takes from the run itself, besides the evaluation.
constexpr const char* kRunMetrics[] = {"tokens", "bytes_sent", "sim_wall_s"};

// The columns of both tables after the name and the axes; cells.csv adds kCellColumns.
const std::vector<std::string> kColumns = {
    "cell", "loss", "params", "non_embedding_params", "replicas", "algorithm", "tokens", "lr", "outer_lr",
    "batch_tokens", "bytes_sent", "sim_wall_s", "wall_s", "eval_tokens"};
const std::vector<std::string> kCellColumns = {"best_run", "seeds", "loss_best_run", "loss_min", "loss_max",
                                               "loss_sd"};

fs::path run_dir(const SweepPlan& plan, const SweepRun& run) { return plan.out_dir / run.name; }
fs::path run_log(const SweepPlan& plan, const SweepRun& run) { return plan.out_dir / (run.name + ".log"); }

// The last line of `file` that is a JSON object (a metrics file, or loco eval's output).
nlohmann::json last_json_line(const fs::path& file) {
  std::istringstream lines(read_file(file));
  nlohmann::json last;
  for (std::string line; std::getline(lines, line);) {
    auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) last = std::move(parsed);
  }
  if (last.is_null()) throw DataError(fmt::format("{} holds no JSON line", file.string()));
  return last;
}

std::vector<std::string> train_command(const SweepPlan& plan, const SweepRun& run, const std::string& loco) {
  std::vector<std::string> argv = {loco};
  if (run.launched) {
    argv.insert(argv.end(), {"launch", "--nproc", std::to_string(run.replicas), "--master-port", "0", "--"});
  }
  argv.insert(argv.end(), {"train", "--config", plan.base.string()});
  for (const std::string& o : run.overrides) argv.insert(argv.end(), {"--set", o});
  return argv;
}

// η of the algorithms that have one; null for the others.
nlohmann::json outer_lr_of(const RunConfig& config) {
  if (config.dist.algorithm == "diloco") return config.diloco.outer_lr;
  if (config.dist.algorithm == "streaming") return config.streaming.outer_lr;
  if (config.dist.algorithm == "sparseloco") return config.sparseloco.outer_lr;
  return nullptr;
}

// How the sweep evaluates every run ([eval]): a result scored otherwise is not comparable with the others.
nlohmann::json eval_settings(const SweepPlan& plan) {
  return {{"batches", plan.eval_batches}, {"batch_size", plan.eval_batch_size}};
}

// The result of a trained run: its final checkpoint evaluated, its size and what it cost.
nlohmann::json evaluate_run(const SweepPlan& plan, const SweepRun& run, const SweepOptions& options, double wall_s) {
  const fs::path dir = run_dir(plan, run);
  const fs::path checkpoint = dir / "checkpoints" / fmt::format("step_{}", run.steps);
  if (!fs::is_directory(checkpoint)) {
    throw DataError(fmt::format("the run ended without its final checkpoint {}", checkpoint.string()));
  }
  std::vector<std::string> eval = {options.loco, "eval",       "--checkpoint", checkpoint.string(),
                                   "--data",     run.data_dir, "--batches",    std::to_string(plan.eval_batches),
                                   "--device",   run.device};
  if (plan.eval_batch_size > 0) eval.insert(eval.end(), {"--batch-size", std::to_string(plan.eval_batch_size)});
  // Written beside, and named final_eval.json once whole: an evaluation stopped midway leaves no file of that name.
  const fs::path eval_output = dir / "final_eval.json";
  const fs::path unfinished = dir / "final_eval.json.partial";
  const int status = run_program(eval, {unfinished, run_log(plan, run), /*append=*/true}, options.programs);
  if (status != 0) throw DataError(fmt::format("loco eval of {} failed (exit {})", checkpoint.string(), status));
  const nlohmann::json evaluated = last_json_line(unfinished);
  fs::rename(unfinished, eval_output);
  // The config as the run saved it: derived values resolved, the vocabulary known.
  const RunConfig config = read_config_for_planning(dir / "config.toml");
  const std::string source = (dir / "config.toml").string();
  nlohmann::json result = {
      {"name", run.name},
      {"cell", run.cell},
      {"loss", evaluated.at("loss")},
      {"eval_tokens", evaluated.at("tokens")},
      {"params", sim::count_parameters(config.model, sim::ParamConvention::kTotal, source)},
      {"non_embedding_params", sim::count_parameters(config.model, sim::ParamConvention::kNonEmbedding, source)},
      {"replicas", config.dist.replicas},
      {"algorithm", config.dist.algorithm},
      {"lr", config.optim.lr},
      {"outer_lr", outer_lr_of(config)},
      {"batch_tokens", config.global_batch() * config.data.seq_len},
      {"steps", run.steps},
      {"wall_s", wall_s}};
  const nlohmann::json metrics = last_json_line(dir / "metrics.jsonl");
  for (const char* key : kRunMetrics) result[key] = metrics.value(key, nlohmann::json(0));
  nlohmann::json axes = nlohmann::json::object();
  for (const auto& [key, value] : run.axis_values) axes[key] = value;
  result["axes"] = axes;
  if (!run.repeat_of.empty()) result["repeat_of"] = run.repeat_of;
  result["settings"] = nlohmann::json::parse(run.settings);
  result["eval"] = eval_settings(plan);
  return result;
}

// The run's result in `file` as JSON (discarded when it is not JSON: result_damage says what is wrong).
nlohmann::json read_result(const fs::path& file) {
  return nlohmann::json::parse(read_file(file), nullptr, /*allow_exceptions=*/false);
}

// How the run's config, or the sweep's [eval], differs from what its `result` was made with; nullopt when it does
// not, or the result says nothing of them (written before results kept them, or damaged: the tables say so).
// (Before: a sweep whose [eval] changed kept the old scores beside new ones, on other numbers of tokens.)
std::optional<std::string> changed_since_result(const nlohmann::json& result, const SweepPlan& plan,
                                                const SweepRun& run) {
  if (!result.is_object() || !result.contains("settings")) return std::nullopt;
  if (const auto scored = result.find("eval"); scored != result.end()) {
    const nlohmann::json then = {{"eval", *scored}}, now = {{"eval", eval_settings(plan)}};
    if (const auto difference = first_key_difference(then, now)) {
      return fmt::format("{} was {}, is {}", difference->key, value_text(difference->in_a),
                         value_text(difference->in_b));
    }
  }
  // Read as a config, so that a key a later loco added takes its default, as the plan's does, and is no change.
  nlohmann::json made_with;
  try {
    made_with = nlohmann::json::parse(planned_settings(from_json(result.at("settings"))));
  } catch (const std::exception&) {
    return std::nullopt;  // a key this loco does not know: said nothing of, as a result without settings
  }
  const auto difference = first_key_difference(made_with, nlohmann::json::parse(run.settings));
  if (!difference) return std::nullopt;
  return fmt::format("{} was {}, is {}", difference->key, value_text(difference->in_a), value_text(difference->in_b));
}

class SweepProgress {
 public:
  SweepProgress(std::string phase, std::size_t runs) : phase_(std::move(phase)), runs_(runs) {}
  void say(const std::string& line, bool failed = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    loco::print_unchecked(failed ? stderr : stdout, "[{}{}/{}] {}\n", phase_, ++done_, runs_, line);
    std::fflush(failed ? stderr : stdout);
  }

 private:
  std::mutex mutex_;
  std::string phase_;
  std::size_t runs_, done_ = 0;
};

enum class RunOutcome { done, failed, stopped };

// Trains and evaluates one run unless it has a result.
RunOutcome do_run(const SweepPlan& plan, const SweepRun& run, const SweepOptions& options, SweepProgress& progress) {
  const fs::path dir = run_dir(plan, run);
  if (fs::exists(dir / kResultFile)) {
    const std::optional<std::string> changed = changed_since_result(read_result(dir / kResultFile), plan, run);
    if (!changed) {
      progress.say(fmt::format("{}: done before, skipped", run.name));
      return RunOutcome::done;
    }
    // Before: the result of the old config was kept, and listed as this config's.
    loco::print_unchecked(stdout, "{}: its config changed since its result ({}): trained again\n", run.name, *changed);
  }
  try {
    // A train of an earlier sweep that is still running (its sweep killed) holds the directory: not removed under it.
    const DirectoryLock idle(dir, "run directory");
  } catch (const ConfigError& e) {
    progress.say(fmt::format("{} FAILED: {}", run.name, e.what()), true);
    return RunOutcome::failed;
  }
  // Only what an attempt of this sweep left, which began with the run's log (audit round 14: a `loco train` the
  // user had run into that directory was removed, finished run, checkpoints and all, without a word).
  std::error_code unreadable;
  if (fs::exists(dir, unreadable) && !fs::is_empty(dir, unreadable) && !fs::exists(run_log(plan, run), unreadable)) {
    progress.say(fmt::format("{} FAILED: its directory {} holds files this sweep did not write (no log {}): a run of "
                             "its own? Move it away (or delete it), then run the sweep again",
                             run.name, dir.string(), run_log(plan, run).string()),
                 true);
    return RunOutcome::failed;
  }
  std::error_code removed;
  if (!remove_tree(dir, removed)) {  // what an interrupted attempt left
    progress.say(fmt::format("{} FAILED: cannot remove what an earlier attempt left in {}: {}", run.name,
                             dir.string(), removed.message()),
                 true);
    return RunOutcome::failed;
  }
  const auto start = std::chrono::steady_clock::now();
  // A run the sweep's stop ended (its train or eval stopped, or never started) is redone by the next sweep.
  const auto stopped = [&] {
    if (options.programs == nullptr || options.programs->stopped() == 0) return false;
    progress.say(fmt::format("{}: stopped (the sweep was stopped; run it again to redo this run)", run.name));
    return true;
  };
  try {
    const int status = run_program(train_command(plan, run, options.loco),
                                   {run_log(plan, run), run_log(plan, run), false}, options.programs);
    if (status != 0 && stopped()) return RunOutcome::stopped;
    if (status != 0) throw DataError(fmt::format("loco train exited with {}", status));
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const nlohmann::json result = evaluate_run(plan, run, options, wall_s);
    write_file_atomic(dir / kResultFile, result.dump() + "\n");
    progress.say(fmt::format("{}: loss {:.4f} in {:.0f} s", run.name, result_loss(result), wall_s));
    return RunOutcome::done;
  } catch (const Error& e) {
    if (stopped()) return RunOutcome::stopped;
    progress.say(fmt::format("{} FAILED: {} (log: {})", run.name, e.what(), run_log(plan, run).string()), true);
    return RunOutcome::failed;
  }
}

// Runs `runs`, `jobs` at a time, until they are done or the sweep is stopped; returns how many failed.
int run_all(const SweepPlan& plan, const std::vector<const SweepRun*>& runs, const SweepOptions& options, int jobs,
            const std::string& phase) {
  SweepProgress progress(phase, runs.size());
  std::atomic<std::size_t> next{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> workers;
  for (int j = 0; j < std::min<int>(jobs, static_cast<int>(runs.size())); ++j) {
    workers.emplace_back([&] {
      for (std::size_t i; (i = next++) < runs.size();) {
        if (options.programs != nullptr && options.programs->stopped() != 0) return;
        const RunOutcome outcome = do_run(plan, *runs[i], options, progress);
        if (outcome == RunOutcome::failed) ++failed;
        if (outcome == RunOutcome::stopped) return;
      }
    });
  }
  for (auto& w : workers) w.join();
  return failed;
}

// What is wrong with `result` as the result of `run`, as evaluate_run writes it (every column of the tables of
// its type, so that a hand-edited or cut file is named instead of copied into them); empty when nothing is.
std::string result_damage(const nlohmann::json& result, const SweepRun& run) {
  if (!result.is_object()) return "it is not a JSON object";
  const auto field_is = [&](const char* key, auto&& type_ok, const char* what) -> std::string {
    const auto it = result.find(key);
    if (it == result.end()) return fmt::format("it has no field '{}'", key);
    return type_ok(*it) ? "" : fmt::format("its field '{}' is {}, not {}", key, it->dump(), what);
  };
  const auto string = [](const nlohmann::json& v) { return v.is_string(); };
  const auto number = [](const nlohmann::json& v) { return v.is_number(); };
  const auto number_or_null = [](const nlohmann::json& v) { return v.is_number() || v.is_null(); };  // NaN is null
  std::string damage = field_is(
      "axes", [](const nlohmann::json& v) { return v.is_object(); }, "an object");
  for (const char* key : {"name", "cell", "algorithm"}) {
    if (damage.empty()) damage = field_is(key, string, "a string");
  }
  for (const char* key : {"loss", "outer_lr"}) {
    if (damage.empty()) damage = field_is(key, number_or_null, "a number");
  }
  for (const char* key : {"eval_tokens", "params", "non_embedding_params", "replicas", "lr", "batch_tokens", "steps",
                          "wall_s", "tokens", "bytes_sent", "sim_wall_s"}) {
    if (damage.empty()) damage = field_is(key, number, "a number");
  }
  if (damage.empty() && result.at("name") != run.name) {
    damage = fmt::format("it holds the result of run {}", result.at("name").dump());
  }
  return damage;
}

// The results of the runs (and repeats) of `plan` that have one. A damaged result is an error naming the
// fix (delete it and the sweep redoes that run).
SweepResults read_results(const SweepPlan& plan) {
  SweepResults results;
  const auto read = [&](const SweepRun& run) {
    const fs::path file = run_dir(plan, run) / kResultFile;
    if (!fs::exists(file)) return;
    nlohmann::json result = read_result(file);
    if (const std::string damage = result_damage(result, run); !damage.empty()) {
      throw DataError(
          fmt::format("{} is damaged ({}): delete it, and loco sweep redoes that run", file.string(), damage));
    }
    // A result of another config is not this run's (--tables-only, or a sweep stopped before it was redone).
    if (const auto changed = changed_since_result(result, plan, run)) {
      loco::print_unchecked(
          stdout, "{}: not listed: its result was made with another config ({}); run the sweep to train it again\n",
          run.name, *changed);
      return;
    }
    results[run.name] = std::move(result);
  };
  for (const SweepRun& run : plan.runs) {
    read(run);
    for (const SweepRun& repeat : repeats_of(plan, run)) read(repeat);
  }
  return results;
}

// A CSV field, quoted when it holds a comma, a quote or a space at either end.
std::string csv_field(const std::string& text) {
  const bool quote = text.find_first_of(",\"") != std::string::npos ||
                     (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!quote) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_value(const nlohmann::json& value) {
  if (value.is_null()) return "";
  return csv_field(value.is_string() ? value.get<std::string>() : value.dump());
}

// One table: CSV and JSON lines of `rows` (results), the columns after the name and the axes.
void write_table(const SweepPlan& plan, const std::string& stem, const std::vector<nlohmann::json>& rows,
                 const std::vector<std::string>& columns) {
  std::string csv = "name";
  for (const std::string& axis : plan.axes) csv += "," + csv_field(axis);
  for (const std::string& column : columns) csv += "," + column;
  csv += "\n";
  std::string jsonl;
  for (const nlohmann::json& row : rows) {
    csv += csv_field(row.value("name", ""));
    const nlohmann::json& axes = row.at("axes");
    for (const std::string& axis : plan.axes) csv += "," + (axes.contains(axis) ? csv_value(axes.at(axis)) : "");
    for (const std::string& column : columns) csv += "," + csv_value(row.value(column, nlohmann::json()));
    csv += "\n";
    jsonl += row.dump() + "\n";
  }
  write_file_atomic(plan.out_dir / (stem + ".csv"), csv);
  write_file_atomic(plan.out_dir / (stem + ".jsonl"), jsonl);
}

}  // namespace

int run_sweep(const SweepPlan& plan, const SweepOptions& options) {
  ensure_writable_directory(plan.out_dir, "sweep output directory");
  // Two sweeps of one directory removed each other's runs as they trained and mixed their tables (a result's
  // tokens from a log the other sweep cut short): the second is refused at once.
  const DirectoryLock writing(plan.out_dir, "sweep output directory");
  // `jobs` runs side by side, each with `threads` cores: OpenBLAS's own pool (train/runtime.h, note
  // "blas-pool") would otherwise take every core in each of them and spin against the others. The
  // runs inherit this; a value the user set is kept.
  if (plan.threads > 0) ::setenv("OPENBLAS_NUM_THREADS", std::to_string(plan.threads).c_str(), /*overwrite=*/0);
  const int jobs = options.jobs > 0 ? options.jobs : plan.jobs;
  std::vector<const SweepRun*> runs;
  for (const SweepRun& run : plan.runs) runs.push_back(&run);
  int failed = run_all(plan, runs, options, jobs, "");
  const bool stopped = options.programs != nullptr && options.programs->stopped() != 0;
  if (!plan.repeats.empty() && !stopped) {
    // The repeats are known only now: the best run of each cell whose runs all finished.
    std::vector<SweepRun> repeats;
    for (const SweepCell& cell : find_cells(plan, read_results(plan))) {
      if (cell.best == nullptr) {
        loco::print_unchecked(
            stderr, "cell {}: some of its runs failed; its best run is repeated once they all finish\n", cell.name);
        continue;
      }
      for (SweepRun& repeat : repeats_of(plan, *cell.best)) repeats.push_back(std::move(repeat));
    }
    std::vector<const SweepRun*> pointers;
    for (const SweepRun& repeat : repeats) pointers.push_back(&repeat);
    loco::print_unchecked(stdout, "repeats: the best run of each cell again, {} run(s)\n", repeats.size());
    std::fflush(stdout);
    failed += run_all(plan, pointers, options, jobs, "repeat ");
  }
  write_sweep_summary(plan);
  return failed;
}

int write_sweep_summary(const SweepPlan& plan) {
  // The results are read and the tables written in one turn: `--tables-only` during a sweep read them, then renamed
  // its older tables over the sweep's final ones (audit round 13).
  const TurnLock turn(plan.out_dir, "tables");
  const SweepResults results = read_results(plan);
  std::vector<nlohmann::json> rows;
  for (const SweepRun& run : plan.runs) {
    if (results.count(run.name)) rows.push_back(results.at(run.name));
    for (const SweepRun& repeat : repeats_of(plan, run)) {
      if (results.count(repeat.name)) rows.push_back(results.at(repeat.name));
    }
  }
  write_table(plan, "summary", rows, kColumns);
  if (!plan.tuned.empty()) {
    std::vector<nlohmann::json> cells;
    for (const SweepCell& cell : find_cells(plan, results)) {
      if (cell.best != nullptr) cells.push_back(cell_row(plan, cell, results));
    }
    std::vector<std::string> columns = kColumns;
    columns.insert(columns.end(), kCellColumns.begin(), kCellColumns.end());
    write_table(plan, "cells", cells, columns);
  }
  return static_cast<int>(rows.size());
}

}  // namespace loco
