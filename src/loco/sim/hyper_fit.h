// Optimal learning rate, outer learning rate and batch size against model size (docs/algorithm-reference.md §3): at
// each N the value of the run with the lowest loss, then y* = A·N^α per (algorithm, M), and
// y* = A·N^α·M^β across the replica counts of one algorithm. Fitted only where some size was run at more
// than one value. Each law also reports its leave-one-out error at the largest N: refitted without that
// size, how far it misses the optima there (mean absolute relative error).
#pragma once

#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "loco/sim/fit_data.h"
#include "loco/sim/power_law.h"

namespace loco::sim {

// A run setting that has an optimum: "lr" (inner), "outer_lr" (η) or "batch".
struct Hyperparameter {
  const char* name;
  double FitPoint::*field;
};
inline const Hyperparameter kLearningRate{"lr", &FitPoint::lr};
inline const Hyperparameter kBatch{"batch", &FitPoint::batch};
inline const Hyperparameter kOuterLr{"outer_lr", &FitPoint::outer_lr};
inline const Hyperparameter kHyperparameters[] = {kLearningRate, kOuterLr, kBatch};

// The leave-one-out error at the largest N, or why there is none.
struct HyperHoldOut {
  std::optional<double> mean_abs_relative_error;
  std::string note;
};

struct HyperFit {
  std::string quantity;
  std::string algorithm;
  int replicas = 1;
  std::vector<std::pair<double, double>> optima;  // (N, value of the best run at N)
  std::optional<PowerLaw> law;
  std::string skipped;
  HyperHoldOut holdout;
};

struct JointHyperFit {
  std::string quantity;
  std::string algorithm;
  std::vector<std::tuple<double, int, double>> optima;  // (N, M, value of the best run)
  std::optional<JointPowerLaw> law;
  std::string skipped;
  HyperHoldOut holdout;
};

// `group`: the runs of one (algorithm, M).
HyperFit fit_hyperparameter(const std::vector<FitPoint>& group, const std::string& algorithm, int replicas,
                            const Hyperparameter& quantity);

// From the per-group optima of `algorithm` (entries of other algorithms or quantities are ignored).
JointHyperFit fit_joint_hyperparameter(const std::vector<HyperFit>& per_group, const std::string& algorithm,
                                       const Hyperparameter& quantity);

}  // namespace loco::sim
