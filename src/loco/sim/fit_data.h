// The results `loco fit` reads: one point per finished run, from CSV files or loco run directories.
//
// CSV columns (header names, case-insensitive; other columns are ignored):
//   params | n | parameters     required  model size N (non_embedding_params instead, when present,
//                                         with ParamConvention::kNonEmbedding: loco sweep's tables)
//   loss | eval_loss            required  final evaluation loss
//   replicas | m                optional  M, default 1
//   algorithm                   optional  dp (also ddp), diloco, streaming…; default diloco
//   tokens, lr, outer_lr | eta, batch | batch_size | batch_tokens   optional (empty cells: unknown)
// A run directory holds config.toml, read through config/ with its defaults ([model] for N; [dist]
// replicas and algorithm; [optim] lr; η of diloco or streaming; [train] batch_size × [data] seq_len for
// the batch in tokens) and
// metrics.jsonl (the last line with eval_loss is the final loss). A run without [dist] (algorithm
// "none") is data parallel with M = 1.
#pragma once

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "loco/sim/model_size.h"

namespace loco::sim {

struct FitPoint {
  double params = 0;
  int replicas = 1;
  std::string algorithm = "diloco";
  double loss = 0;
  double tokens = NAN;  // NaN when unknown
  double lr = NAN;
  double outer_lr = NAN;  // η of the DiLoCo family
  double batch = NAN;
  std::string source;  // "file.csv:12" or the run directory
};

std::vector<FitPoint> load_points_csv(const std::filesystem::path& csv,
                                      ParamConvention convention = ParamConvention::kTotal);
FitPoint load_run_directory(const std::filesystem::path& dir, ParamConvention convention);

// Each input is a CSV file, a run directory, or a directory whose subdirectories are runs.
// Throws DataError (unusable content) or IoError (unreadable path) naming the file.
std::vector<FitPoint> load_results(const std::vector<std::string>& inputs, ParamConvention convention);

// "ddp", "data_parallel" and "none" become "dp"; other names are lower-cased.
std::string normalise_algorithm(const std::string& name);

}  // namespace loco::sim
