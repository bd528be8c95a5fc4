// `loco fit`: every scaling-law form of docs/algorithm-reference.md §3 over a set of results, each with its
// residuals and its leave-one-out error at the largest N (fit without the largest size, predict
// it), plus the optimal learning rate, outer learning rate and batch size against N, and predictions.
//
// The loss laws fit the best run (lowest loss) of each (algorithm, M, N), as the published tables
// report the best hyperparameters per cell.
//
//   per group   L = A·N^α for each (algorithm, M)
//   joint       L = A·N^α·M^β over the joint algorithm (DiLoCo by default) across M
//   additive    L = A·N^(α+β·M) + C, Huber on log values, BFGS from many random starts
//   optimal lr, outer_lr and batch: at each N the run with the lowest loss, then y* = A·N^α per group and
//                         y* = A·N^α·M^β across M (hyper_fit.h)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loco/sim/additive_law.h"
#include "loco/sim/fit_data.h"
#include "loco/sim/hyper_fit.h"
#include "loco/sim/power_law.h"

namespace loco::sim {

// "dp" for data parallel (M does not apply), else "diloco M=4".
std::string group_label(const std::string& algorithm, int replicas);

struct PredictionRequest {
  double params = 0;
  std::string algorithm;  // empty: the joint algorithm
  int replicas = 1;
};

// "2.4e9", "2.4e9:8" (M = 8, joint algorithm) or "2.4e9:dp". Throws ConfigError.
PredictionRequest parse_prediction(const std::string& text);

struct FitOptions {
  AdditiveFitOptions additive;
  std::string joint_algorithm;  // empty: diloco when present, else the only non-dp algorithm
  std::vector<PredictionRequest> predictions;
};

struct Residual {
  double params = 0;
  int replicas = 1;
  double loss = 0;
  double predicted = 0;
};

struct FitQuality {
  std::vector<Residual> residuals;
  double rms_log_residual = 0;
  double max_abs_relative_error = 0;
};

// Leave-one-out at the largest N: fitted on the smaller sizes, predicting the largest.
struct HoldOut {
  double params = 0;
  std::vector<Residual> predictions;
  std::optional<double> mean_abs_relative_error;
  std::string note;  // why it could not be computed
};

template <typename Law>
struct FittedForm {
  std::optional<Law> law;
  std::string skipped;  // why the form could not be fitted
  int points = 0;
  FitQuality quality;
  HoldOut holdout;
};

struct GroupFit {
  std::string algorithm;
  int replicas = 1;
  FittedForm<PowerLaw> form;
};

struct Prediction {
  PredictionRequest request;
  std::optional<double> per_group, joint, additive, lr, outer_lr, batch;
};

struct FitReport {
  std::vector<FitPoint> data;
  std::vector<FitPoint> cells;  // the best run of each (algorithm, M, N): what the loss laws fit
  std::string joint_algorithm;  // empty when the data has only data-parallel runs
  std::vector<GroupFit> groups;
  FittedForm<JointPowerLaw> joint;
  FittedForm<AdditiveFit> additive;
  AdditiveFitOptions additive_options;
  std::vector<HyperFit> hyper;             // per group: kHyperparameters in order
  std::vector<JointHyperFit> joint_hyper;  // across M of the joint algorithm: kHyperparameters in order
  std::vector<Prediction> predictions;
};

// Throws DataError when there are no points or no form can be fitted at all (the message gives the
// reason, e.g. fewer points than parameters).
FitReport fit_scaling_laws(const std::vector<FitPoint>& points, const FitOptions& options);

}  // namespace loco::sim
