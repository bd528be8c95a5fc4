#include "loco/sim/fit_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "loco/config/load_config.h"
#include "loco/sim/csv.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/parse_number.h"
#include "loco/util/print_unchecked.h"

namespace loco::sim {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The index of the header named one of `names` (aliases of one column), or -1. Two such headers are refused:
// before, the first was taken and the other ignored without a word.
int column(const std::vector<std::string>& header, std::initializer_list<const char*> names, const fs::path& csv) {
  int found = -1;
  for (std::size_t i = 0; i < header.size(); ++i) {
    const std::string name = lower(header[i]);
    if (std::none_of(names.begin(), names.end(), [&](const char* n) { return name == n; })) continue;
    if (found >= 0) {
      throw DataError(
          fmt::format("{} has two columns of the {}: '{}' (column {}) and '{}' (column {}). Keep one of "
                      "them",
                      csv.string(), *names.begin(), header[found], found + 1, header[i], i + 1));
    }
    found = static_cast<int>(i);
  }
  return found;
}

// A positive finite number from a CSV cell; NaN for an empty optional cell.
double cell_number(const std::vector<std::string>& row, int index, const char* name, bool required,
                   const std::string& where) {
  if (index < 0 || row[index].empty()) {
    if (required) throw DataError(fmt::format("{}: the {} value is empty; every row needs one.", where, name));
    return NAN;
  }
  const std::optional<double> parsed = parse_whole_number(row[index]);
  const double x = parsed.value_or(NAN);
  if (!parsed || x <= 0) {
    throw DataError(fmt::format("{}: {} '{}' is not a positive finite decimal number; fix or remove the row.", where,
                                name, row[index]));
  }
  return x;
}

int replica_count(double value, const std::string& where) {
  if (std::isnan(value)) return 1;
  if (value != std::floor(value) || value < 1 || value > 1e6) {
    throw DataError(fmt::format("{}: replicas must be a whole number ≥ 1 (got {}).", where, value));
  }
  return static_cast<int>(value);
}

// The last metrics line with eval_loss, and the last `tokens` seen; returns the step of that evaluation.
std::int64_t read_final_eval(const fs::path& metrics, FitPoint& point) {
  std::string text = read_file(metrics);
  std::istringstream stream(text);
  std::optional<double> loss;
  std::int64_t evaluated_at = -1;
  int number = 0;
  for (std::string line; std::getline(stream, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json entry = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (entry.is_discarded() || !entry.is_object()) {
      bool unfinished_last_line = stream.peek() == EOF && !text.empty() && text.back() != '\n';
      if (unfinished_last_line) break;  // a run stopped mid-write; the lines before are whole
      throw DataError(
          fmt::format("{} line {} is not a JSON object; the metrics file is damaged. Fix "
                      "or remove that line.",
                      metrics.string(), number));
    }
    if (entry.contains("tokens") && entry["tokens"].is_number()) point.tokens = entry["tokens"].get<double>();
    if (entry.contains("eval_loss")) {
      const nlohmann::json step = entry.value("step", nlohmann::json());
      evaluated_at = step.is_number_integer() ? step.get<std::int64_t>() : -1;
      if (entry["eval_loss"].is_null()) {  // nlohmann writes NaN and infinities as null
        loss = NAN;
        continue;
      }
      if (!entry["eval_loss"].is_number()) {
        throw DataError(fmt::format("{} line {}: eval_loss is not a number.", metrics.string(), number));
      }
      loss = entry["eval_loss"].get<double>();
    }
  }
  if (!loss) {
    throw DataError(
        fmt::format("{} has no line with eval_loss, so the run has no final evaluation loss. "
                    "Train with evaluation enabled (or run loco eval) before fitting.",
                    metrics.string()));
  }
  if (!std::isfinite(*loss) || *loss <= 0) {
    throw DataError(
        fmt::format("{}: the final eval_loss is {}; a diverged run cannot be fitted. "
                    "Leave it out.",
                    metrics.string(), *loss));
  }
  point.loss = *loss;
  return evaluated_at;
}

bool is_run_directory(const fs::path& dir) {
  return fs::exists(dir / "metrics.jsonl") || fs::exists(dir / "config.toml");
}

}  // namespace

std::string normalise_algorithm(const std::string& name) {
  std::string n = lower(name);
  // A single replica ("none", loco's dist.algorithm for it) trains as data parallel with M = 1.
  return n == "ddp" || n == "data_parallel" || n == "none" ? "dp" : n;
}

std::vector<FitPoint> load_points_csv(const fs::path& csv, ParamConvention convention) {
  // A results table holds a row per run: 256 MiB is millions of them, and a file beyond is no such table.
  constexpr std::uint64_t kMostCsvBytes = std::uint64_t{256} << 20;
  CsvTable table = parse_csv(read_file(csv, kMostCsvBytes), csv.string());
  const int non_embedding = column(table.header, {"non_embedding_params"}, csv);
  const int params = convention == ParamConvention::kNonEmbedding && non_embedding >= 0
                         ? non_embedding
                         : column(table.header, {"params", "n", "parameters"}, csv);
  if (convention == ParamConvention::kNonEmbedding && non_embedding < 0 && params >= 0) {
    // A table's counts cannot be converted (it says nothing of the vocabulary): fitted as given, said once.
    loco::print_unchecked(stderr,
                          "fit: note: {} has no non_embedding_params column, so --count non-embedding cannot count "
                          "its runs: its {} column is N as it is (add a non_embedding_params column, as loco "
                          "sweep's tables have, if those counts include the embeddings)\n",
                          csv.string(), table.header[static_cast<std::size_t>(params)]);
  }
  const int loss = column(table.header, {"loss", "eval_loss"}, csv);
  if (params < 0 || loss < 0) {
    throw DataError(
        fmt::format("{} needs a params column and a loss column (header: params,replicas,"
                    "loss; optional algorithm, tokens, lr, outer_lr, batch).",
                    csv.string()));
  }
  const int replicas = column(table.header, {"replicas", "m"}, csv);
  const int algorithm = column(table.header, {"algorithm"}, csv);
  const int tokens = column(table.header, {"tokens"}, csv);
  const int lr = column(table.header, {"lr"}, csv);
  const int outer_lr = column(table.header, {"outer_lr", "eta"}, csv);
  const int batch = column(table.header, {"batch", "batch_size", "batch_tokens"}, csv);
  std::vector<FitPoint> points;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const auto& row = table.rows[r];
    const std::string where = fmt::format("{} line {}", csv.string(), table.line_numbers[r]);
    FitPoint p;
    p.params = cell_number(row, params, "params", true, where);
    p.loss = cell_number(row, loss, "loss", true, where);
    p.replicas = replica_count(cell_number(row, replicas, "replicas", false, where), where);
    if (algorithm >= 0 && !row[algorithm].empty()) p.algorithm = normalise_algorithm(row[algorithm]);
    p.tokens = cell_number(row, tokens, "tokens", false, where);
    p.lr = cell_number(row, lr, "lr", false, where);
    p.outer_lr = cell_number(row, outer_lr, "outer_lr", false, where);
    p.batch = cell_number(row, batch, "batch", false, where);
    p.source = where;
    points.push_back(p);
  }
  return points;
}

FitPoint load_run_directory(const fs::path& dir, ParamConvention convention) {
  const fs::path config = dir / "config.toml", metrics = dir / "metrics.jsonl";
  for (const auto& file : {config, metrics}) {
    if (!fs::exists(file)) {
      throw DataError(
          fmt::format("{} is not a finished loco run: {} is missing. Point loco fit at run "
                      "directories (config.toml + metrics.jsonl) or at a results CSV.",
                      dir.string(), file.filename().string()));
    }
  }
  FitPoint p;
  p.source = dir.string();
  std::int64_t steps = 0;
  try {
    const RunConfig run = read_config_for_planning(config);
    p.params = count_parameters(run.model, convention, config.string());
    p.replicas = replica_count(static_cast<double>(run.dist.replicas), config.string());
    p.algorithm = normalise_algorithm(run.dist.algorithm);
    p.lr = run.optim.lr;
    if (run.dist.algorithm == "diloco") p.outer_lr = run.diloco.outer_lr;
    if (run.dist.algorithm == "streaming") p.outer_lr = run.streaming.outer_lr;
    p.batch = static_cast<double>(run.train.batch_size * run.data.seq_len);
    steps = run.train.steps;
  } catch (const ConfigError& e) {
    throw DataError(fmt::format("run {} cannot be used: {}", dir.string(), e.what()));
  }
  // A run stopped before its end has the loss of an earlier evaluation (before: fitted as the run's final one,
  // and as the best of its cell it replaced a finished run).
  const std::int64_t evaluated_at = read_final_eval(metrics, p);
  if (steps > 0 && evaluated_at >= 0 && evaluated_at < steps) {  // a metrics file of loco's has the steps
    throw DataError(
        fmt::format("run {} was last evaluated at step {}, but it trains {} steps (train.steps): it "
                    "was stopped before its end, so its loss is not the run's final one. Resume it to "
                    "its end (loco train --resume), or leave it out",
                    dir.string(), evaluated_at, steps));
  }
  return p;
}

std::vector<FitPoint> load_results(const std::vector<std::string>& inputs, ParamConvention convention) {
  std::vector<FitPoint> points;
  // A file or run named twice (given twice, or a run given and inside a directory given) is read once: twice, its
  // points would weigh double in the fit and be counted twice (`loco fit a.csv a.csv` said "70 results").
  std::set<fs::path> read;
  const auto first_reading = [&](const fs::path& path) {
    std::error_code unresolved;
    const fs::path canonical = fs::weakly_canonical(path, unresolved);
    if (read.insert(unresolved ? path.lexically_normal() : canonical).second) return true;
    loco::print_unchecked(stderr, "fit: {} was named already; read once\n", path.string());
    return false;
  };
  for (const auto& input : inputs) {
    fs::path path(input);
    if (fs::is_regular_file(path)) {
      if (!first_reading(path)) continue;
      auto loaded = load_points_csv(path, convention);
      points.insert(points.end(), loaded.begin(), loaded.end());
    } else if (fs::is_directory(path) && is_run_directory(path)) {
      if (first_reading(path)) points.push_back(load_run_directory(path, convention));
    } else if (fs::is_directory(path)) {
      std::vector<fs::path> runs;
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_directory() && is_run_directory(entry.path())) runs.push_back(entry.path());
      }
      if (runs.empty()) {
        throw DataError(
            fmt::format("{} holds no loco runs (directories with config.toml and "
                        "metrics.jsonl) and is not a CSV file.",
                        path.string()));
      }
      std::sort(runs.begin(), runs.end());
      for (const auto& run : runs) {
        if (first_reading(run)) points.push_back(load_run_directory(run, convention));
      }
    } else {
      throw IoError(fmt::format("{} {}; give results CSV files or run directories.", input,
                                fs::exists(path) ? "is neither a file nor a directory (a FIFO or a device)"
                                                 : "does not exist"));
    }
  }
  return points;
}

}  // namespace loco::sim
