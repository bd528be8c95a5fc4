// Power laws fitted by least squares on log values (docs/algorithm-reference.md §3):
//   per group      y = A·N^α               (loss against size for one algorithm and M; also the
//                                          optimal learning rate or batch against size)
//   joint          L = A·N^α·M^β           (DiLoCo across replica counts)
// Errors name the problem: fewer points than parameters, or a single size / replica count.
#pragma once

#include <string>
#include <vector>

namespace loco::sim {

struct PowerLaw {
  double A = 0, alpha = 0;
  double operator()(double n) const;
};

struct JointPowerLaw {
  double A = 0, alpha = 0, beta = 0;
  double operator()(double n, double m) const;
};

// Throws DataError when there are fewer than 2 points, values are not positive and finite, or all
// points share one N. `what` names the data in messages ("loss of diloco M=2").
PowerLaw fit_power_law(const std::vector<double>& n, const std::vector<double>& y, const std::string& what);

// Throws DataError with fewer than 3 points or without two distinct N and two distinct M.
JointPowerLaw fit_joint_power_law(const std::vector<double>& n, const std::vector<double>& m,
                                  const std::vector<double>& loss, const std::string& what);

// Throws DataError naming `what` when any value is not positive and finite (a log would be NaN).
void require_positive_values(const std::vector<double>& values, const std::string& quantity, const std::string& what);

}  // namespace loco::sim
