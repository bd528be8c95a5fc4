// Optimal learning rate and batch size against model size (ALGORITHMS.md §3): at each N the value
// of the run with the lowest loss, then y* = A·N^α per (algorithm, M), and y* = A·N^α·M^β across
// the replica counts of one algorithm. Fitted only where some size was run at more than one value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loco/sim/fit_data.h"
#include "loco/sim/power_law.h"

namespace loco::sim {

// A run setting that has an optimum: "lr" or "batch".
struct Hyperparameter {
  const char* name;
  double FitPoint::*field;
};
inline const Hyperparameter kLearningRate{"lr", &FitPoint::lr};
inline const Hyperparameter kBatch{"batch", &FitPoint::batch};

struct HyperFit {
  std::string quantity;
  std::string algorithm;
  int replicas = 1;
  std::vector<std::pair<double, double>> optima;  // (N, value of the best run at N)
  std::optional<PowerLaw> law;
  std::string skipped;
};

struct JointHyperFit {
  std::string quantity;
  std::string algorithm;
  std::optional<JointPowerLaw> law;
  std::string skipped;
};

// `group`: the runs of one (algorithm, M).
HyperFit fit_hyperparameter(const std::vector<FitPoint>& group, const std::string& algorithm, int replicas,
                            const Hyperparameter& quantity);

// From the per-group optima of `algorithm` (entries of other algorithms or quantities are ignored).
JointHyperFit fit_joint_hyperparameter(const std::vector<HyperFit>& per_group, const std::string& algorithm,
                                       const Hyperparameter& quantity);

}  // namespace loco::sim
