#include "loco/sim/least_squares.h"

#include <algorithm>
#include <cmath>

#include "loco/util/error.h"

namespace loco::sim {

std::optional<std::vector<double>> solve_least_squares(const std::vector<std::vector<double>>& rows,
                                                       const std::vector<double>& y) {
  const std::size_t m = rows.size();
  LOCO_CHECK(m == y.size() && m > 0, "least squares with {} rows and {} targets", m, y.size());
  const std::size_t n = rows[0].size();
  LOCO_CHECK(n > 0 && n <= m, "least squares with {} columns and {} rows", n, m);
  std::vector<std::vector<double>> a = rows;  // reduced in place to R (upper triangle)
  std::vector<double> b = y;
  double largest_pivot = 0;
  for (std::size_t k = 0; k < n; ++k) {
    // Householder reflection that zeroes column k below the diagonal.
    double norm = 0;
    for (std::size_t i = k; i < m; ++i) norm += a[i][k] * a[i][k];
    norm = std::sqrt(norm);
    largest_pivot = std::max(largest_pivot, norm);
    if (norm <= 1e-12 * largest_pivot || norm == 0) return std::nullopt;
    double alpha = a[k][k] > 0 ? -norm : norm;
    std::vector<double> v(m - k);
    for (std::size_t i = k; i < m; ++i) v[i - k] = a[i][k];
    v[0] -= alpha;
    double v_norm2 = 0;
    for (double x : v) v_norm2 += x * x;
    auto reflect = [&](auto&& column_at) {
      double dot = 0;
      for (std::size_t i = k; i < m; ++i) dot += v[i - k] * column_at(i);
      double scale = 2 * dot / v_norm2;
      for (std::size_t i = k; i < m; ++i) column_at(i) -= scale * v[i - k];
    };
    for (std::size_t j = k; j < n; ++j) reflect([&](std::size_t i) -> double& { return a[i][j]; });
    reflect([&](std::size_t i) -> double& { return b[i]; });
  }
  std::vector<double> x(n);
  for (std::size_t k = n; k-- > 0;) {
    double sum = b[k];
    for (std::size_t j = k + 1; j < n; ++j) sum -= a[k][j] * x[j];
    x[k] = sum / a[k][k];
  }
  return x;
}

}  // namespace loco::sim
