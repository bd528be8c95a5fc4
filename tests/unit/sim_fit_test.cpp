// Scaling-law fits: the published joint fit from the published table (docs/algorithm-reference.md §3), known
// parameters recovered from noisy synthetic data, the optimiser, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "loco/sim/additive_law.h"
#include "loco/sim/bfgs.h"
#include "loco/sim/fit_data.h"
#include "loco/sim/least_squares.h"
#include "loco/sim/power_law.h"
#include "loco/sim/scaling_fit.h"
#include "loco/util/error.h"

namespace loco::sim {
namespace {

const std::vector<double> kSizes = {35e6, 90e6, 180e6, 335e6, 550e6, 1.3e9, 2.4e9};
const std::vector<double> kReplicas = {1, 2, 4, 8};

std::vector<FitPoint> published_table() {
  return load_points_csv(std::string(LOCO_FIXTURE_DIR) + "/scaling_law_table.csv");
}

// Multiplicative noise of relative size up to `amount`, the same on every platform.
class Noise {
 public:
  explicit Noise(double amount) : amount_(amount) {}
  double operator()() { return 1 + amount_ * (2 * (static_cast<double>(rng_() >> 11) * 0x1.0p-53) - 1); }

 private:
  double amount_;
  std::mt19937_64 rng_{42};
};

template <typename F>
void expect_data_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SimFit, ReproducesThePublishedJointFit) {
  FitReport report = fit_scaling_laws(published_table(), {});
  EXPECT_EQ(report.joint_algorithm, "diloco");
  ASSERT_TRUE(report.joint.law.has_value());
  EXPECT_EQ(report.joint.points, 28);
  EXPECT_NEAR(report.joint.law->A, 19.226, 0.01 * 19.226);
  EXPECT_NEAR(report.joint.law->alpha, -0.0985, 0.0005);
  EXPECT_NEAR(report.joint.law->beta, 0.0116, 0.0005);
}

TEST(SimFit, ReproducesThePublishedDataParallelLaw) {
  FitReport report = fit_scaling_laws(published_table(), {});
  const GroupFit* dp = nullptr;
  for (const auto& g : report.groups) {
    if (g.algorithm == "dp") dp = &g;
  }
  ASSERT_NE(dp, nullptr);
  ASSERT_TRUE(dp->form.law.has_value());
  EXPECT_NEAR(dp->form.law->A, 18.129, 0.01 * 18.129);
  EXPECT_NEAR(dp->form.law->alpha, -0.0953, 0.0005);
  // Held out, the 2.4B loss is predicted from the six smaller sizes within 2%.
  ASSERT_TRUE(dp->form.holdout.mean_abs_relative_error.has_value());
  EXPECT_DOUBLE_EQ(dp->form.holdout.params, 2.4e9);
  EXPECT_LT(*dp->form.holdout.mean_abs_relative_error, 0.02);
}

TEST(SimFit, AdditiveFormFitsThePublishedTable) {
  FitReport report = fit_scaling_laws(published_table(), {});
  ASSERT_TRUE(report.additive.law.has_value());
  EXPECT_LT(report.additive.quality.max_abs_relative_error, 0.01);
  EXPECT_GE(report.additive.law->starts_at_optimum, 32);
  ASSERT_TRUE(report.additive.holdout.mean_abs_relative_error.has_value());
  EXPECT_LT(*report.additive.holdout.mean_abs_relative_error, 0.02);
}

TEST(SimFit, RecoversAPowerLawFromNoisyData) {
  Noise noise(0.003);
  std::vector<double> n, y;
  for (double size : kSizes) {
    n.push_back(size);
    y.push_back(17.5 * std::pow(size, -0.09) * noise());
  }
  PowerLaw law = fit_power_law(n, y, "synthetic");
  EXPECT_NEAR(law.alpha, -0.09, 0.003);
  EXPECT_NEAR(law.A, 17.5, 0.05 * 17.5);
}

TEST(SimFit, RecoversTheJointLawFromNoisyData) {
  Noise noise(0.003);
  std::vector<double> n, m, loss;
  for (double size : kSizes) {
    for (double replicas : kReplicas) {
      n.push_back(size);
      m.push_back(replicas);
      loss.push_back(21.0 * std::pow(size, -0.1) * std::pow(replicas, 0.02) * noise());
    }
  }
  JointPowerLaw law = fit_joint_power_law(n, m, loss, "synthetic");
  EXPECT_NEAR(law.alpha, -0.1, 0.002);
  EXPECT_NEAR(law.beta, 0.02, 0.002);
  EXPECT_NEAR(law.A, 21.0, 0.05 * 21.0);
}

TEST(SimFit, RecoversTheAdditiveLaw) {
  const AdditiveLaw truth{40.0, -0.15, 0.004, 1.6};
  for (double amount : {0.0, 0.002}) {
    Noise noise(amount);
    std::vector<double> n, m, loss;
    for (double size : kSizes) {
      for (double replicas : kReplicas) {
        n.push_back(size);
        m.push_back(replicas);
        loss.push_back(truth(size, replicas) * noise());
      }
    }
    AdditiveFit fit = fit_additive_law(n, m, loss, {});
    const double tolerance = amount == 0 ? 1e-4 : 1;  // relative to the noisy tolerances below
    EXPECT_NEAR(fit.law.alpha, truth.alpha, std::max(1e-6, 0.01 * tolerance)) << amount;
    EXPECT_NEAR(fit.law.beta, truth.beta, std::max(1e-7, 0.001 * tolerance)) << amount;
    EXPECT_NEAR(fit.law.C, truth.C, std::max(1e-5, 0.1 * tolerance) * truth.C) << amount;
    EXPECT_NEAR(fit.law.A, truth.A, std::max(1e-4, 0.2 * tolerance) * truth.A) << amount;
  }
}

// Each start is a fit over every point: beyond kMostPointFits together the form is refused with the fix, at
// once (100,000 points ran for minutes without a word).
TEST(SimFit, AnAdditiveFitBeyondItsBoundIsRefusedWithTheFix) {
  const AdditiveLaw truth{40.0, -0.15, 0.004, 1.6};
  std::vector<double> n, m, loss;
  for (int i = 0; i < 20000; ++i) {
    n.push_back(1e6 * (1 + i));
    m.push_back(1 + i % 4);
    loss.push_back(truth(n.back(), m.back()));
  }
  expect_data_error([&] { fit_additive_law(n, m, loss, {}); },
                    "fitting L = A·N^(α+β·M) + C to 20000 points from 64 starts is 1.28e+06 point-fits, beyond the "
                    "1e+06 that take about a minute: give --starts 50 or fewer");
  AdditiveFitOptions fewer;
  fewer.starts = 10000;
  n.resize(200);
  m.resize(200);
  loss.resize(200);
  expect_data_error([&] { fit_additive_law(n, m, loss, fewer); }, "give --starts 5000 or fewer");
}

TEST(SimFit, LeaveOneOutOfExactDataPredictsExactly) {
  std::vector<FitPoint> points;
  for (double size : kSizes) {
    FitPoint p;
    p.params = size;
    p.algorithm = "dp";
    p.loss = 12.0 * std::pow(size, -0.08);
    points.push_back(p);
  }
  FitReport report = fit_scaling_laws(points, {});
  ASSERT_EQ(report.groups.size(), 1u);
  ASSERT_TRUE(report.groups[0].form.holdout.mean_abs_relative_error.has_value());
  EXPECT_LT(*report.groups[0].form.holdout.mean_abs_relative_error, 1e-9);
  EXPECT_FALSE(report.joint.law.has_value());
  EXPECT_NE(report.joint.skipped.find("only data-parallel"), std::string::npos);
}

TEST(SimFit, OptimalLearningRatesAndBatchAgainstSizeAndReplicas) {
  // At each size and M, runs at lr*·{0.5, 1, 2}, η*·{0.5, 1, 2} and batch*·{0.5, 1, 2}; the loss is lowest
  // at the optimum lr* = 0.02·N^-0.2·M^0.5, η* = 0.4·M^0.3 (no drift with N), batch* = 3·N^0.3·M^-0.25.
  auto best_lr = [](double n, double m) { return 0.02 * std::pow(n, -0.2) * std::pow(m, 0.5); };
  auto best_eta = [](double, double m) { return 0.4 * std::pow(m, 0.3); };
  auto best_batch = [](double n, double m) { return 3.0 * std::pow(n, 0.3) * std::pow(m, -0.25); };
  std::vector<FitPoint> points;
  const double factors[] = {0.5, 1.0, 2.0};
  for (int replicas : {2, 4}) {
    for (double size : {50e6, 100e6, 200e6, 400e6}) {
      for (double lr_factor : factors) {
        for (double eta_factor : factors) {
          for (double batch_factor : factors) {
            FitPoint p;
            p.params = size;
            p.replicas = replicas;
            p.lr = best_lr(size, replicas) * lr_factor;
            p.outer_lr = best_eta(size, replicas) * eta_factor;
            p.batch = best_batch(size, replicas) * batch_factor;
            p.loss = 10 * std::pow(size, -0.1) + 0.1 * std::pow(std::log(lr_factor), 2) +
                     0.08 * std::pow(std::log(eta_factor), 2) + 0.05 * std::pow(std::log(batch_factor), 2);
            points.push_back(p);
          }
        }
      }
    }
  }
  FitOptions options;
  options.predictions = {parse_prediction("800e6:2"), parse_prediction("800e6:8")};
  FitReport report = fit_scaling_laws(points, options);
  EXPECT_EQ(report.cells.size(), 8u);  // the best run of each (M, N)
  ASSERT_EQ(report.hyper.size(), 6u);  // lr, outer_lr and batch for M = 2 and M = 4
  for (const auto& h : report.hyper) {
    ASSERT_TRUE(h.law.has_value()) << h.quantity << ": " << h.skipped;
    EXPECT_EQ(h.optima.size(), 4u);
    // Exact power laws: refitted without the largest size, each still hits it.
    ASSERT_TRUE(h.holdout.mean_abs_relative_error.has_value()) << h.holdout.note;
    EXPECT_LT(*h.holdout.mean_abs_relative_error, 1e-9);
  }
  EXPECT_EQ(report.hyper[1].quantity, "outer_lr");
  EXPECT_NEAR(report.hyper[0].law->A, 0.02 * std::sqrt(2.0), 1e-9);  // lr of M = 2
  EXPECT_NEAR(report.hyper[0].law->alpha, -0.2, 1e-9);
  EXPECT_NEAR(report.hyper[1].law->A, 0.4 * std::pow(2.0, 0.3), 1e-9);  // outer_lr of M = 2
  EXPECT_NEAR(report.hyper[1].law->alpha, 0.0, 1e-9);
  EXPECT_NEAR(report.hyper[2].law->alpha, 0.3, 1e-9);  // batch of M = 2
  ASSERT_EQ(report.joint_hyper.size(), 3u);
  for (const auto& j : report.joint_hyper) {
    ASSERT_TRUE(j.law) << j.quantity << ": " << j.skipped;
    EXPECT_EQ(j.optima.size(), 8u);
    ASSERT_TRUE(j.holdout.mean_abs_relative_error.has_value()) << j.holdout.note;
    EXPECT_LT(*j.holdout.mean_abs_relative_error, 1e-9);
  }
  EXPECT_NEAR(report.joint_hyper[0].law->A, 0.02, 1e-9);
  EXPECT_NEAR(report.joint_hyper[0].law->alpha, -0.2, 1e-9);
  EXPECT_NEAR(report.joint_hyper[0].law->beta, 0.5, 1e-9);
  EXPECT_NEAR(report.joint_hyper[1].law->A, 0.4, 1e-9);
  EXPECT_NEAR(report.joint_hyper[1].law->alpha, 0.0, 1e-9);
  EXPECT_NEAR(report.joint_hyper[1].law->beta, 0.3, 1e-9);
  EXPECT_NEAR(report.joint_hyper[2].law->A, 3.0, 1e-8);
  EXPECT_NEAR(report.joint_hyper[2].law->beta, -0.25, 1e-9);
  ASSERT_EQ(report.predictions.size(), 2u);
  // M = 2 has its own laws; M = 8 was never run and falls back on the laws across M.
  ASSERT_TRUE(report.predictions[0].per_group && report.predictions[0].lr);
  EXPECT_NEAR(*report.predictions[0].per_group, 10 * std::pow(800e6, -0.1), 1e-6);
  EXPECT_NEAR(*report.predictions[0].lr, best_lr(800e6, 2), 1e-12);
  EXPECT_FALSE(report.predictions[1].per_group.has_value());
  ASSERT_TRUE(report.predictions[1].lr && report.predictions[1].outer_lr && report.predictions[1].batch &&
              report.predictions[1].joint);
  EXPECT_NEAR(*report.predictions[1].lr, best_lr(800e6, 8), 1e-12);
  EXPECT_NEAR(*report.predictions[1].outer_lr, best_eta(800e6, 8), 1e-9);
  EXPECT_NEAR(*report.predictions[1].batch, best_batch(800e6, 8), 1e-6);
}

TEST(SimFit, TheHeldOutErrorOfAnOptimumLawMeasuresItsMissAtTheLargestSize) {
  // η* = 0.5 at the three smaller sizes, 0.25 at the largest: refitted without it, the law predicts 0.5
  // there, 100% above the optimum.
  std::vector<FitPoint> points;
  for (double size : {1e6, 2e6, 4e6, 8e6}) {
    for (double eta : {0.25, 0.5}) {
      FitPoint p;
      p.params = size;
      p.replicas = 2;
      p.outer_lr = eta;
      p.loss = (eta == 0.5) == (size < 8e6) ? 3.0 : 3.1;
      points.push_back(p);
    }
  }
  const FitReport report = fit_scaling_laws(points, {});
  ASSERT_TRUE(report.hyper[1].law && report.hyper[1].holdout.mean_abs_relative_error);
  EXPECT_NEAR(*report.hyper[1].holdout.mean_abs_relative_error, 1.0, 1e-9);
  // With two sizes nothing is left to refit on.
  points.resize(4);
  const FitReport two = fit_scaling_laws(points, {});
  ASSERT_TRUE(two.hyper[1].law.has_value());
  EXPECT_FALSE(two.hyper[1].holdout.mean_abs_relative_error.has_value());
  EXPECT_NE(two.hyper[1].holdout.note.find("without the largest N"), std::string::npos) << two.hyper[1].holdout.note;
}

TEST(SimFit, TooFewPointsAreClearErrors) {
  expect_data_error([] { fit_power_law({1e8}, {3.0}, "one run"); }, "1 point for 2 parameters");
  expect_data_error([] { fit_power_law({1e8, 1e8}, {3.0, 3.1}, "one size"); }, "every point has N");
  expect_data_error(
      [] {
        fit_joint_power_law({1e8, 2e8, 4e8}, {2, 2, 2}, {3, 2.9, 2.8}, "one M");
      },
      "two replica counts");
  expect_data_error(
      [] {
        fit_additive_law({1e8, 2e8, 4e8}, {1, 2, 4}, {3, 2.9, 2.8}, {});
      },
      "3 points for 4 parameters");
  expect_data_error([] { fit_power_law({1e8, 2e8}, {3.0, NAN}, "a diverged run"); }, "positive finite");
  // Finite but useless: a subnormal loss keeps no precision; a loss of 1e308 among losses of 3 makes a
  // slope whose prefactor exp cannot hold (A was 0 or inf, its errors NaN).
  expect_data_error([] { fit_power_law({1e6, 2e6, 4e6}, {1e-320, 3, 2.5}, "a tiny loss"); }, "contains 9.99989e-321");
  expect_data_error(
      [] {
        fit_power_law({1e6, 2e6, 4e6}, {1e308, 3, 2.5}, "a huge loss");
      },
      "its values run from 2.5 to 1e+308, and the fit's prefactor A = e^");
  expect_data_error(
      [] {
        fit_joint_power_law({1e6, 2e6, 4e6}, {1, 2, 1}, {1e308, 3, 2.5}, "a huge loss");
      },
      "beyond double precision");
  FitPoint single;
  single.params = 1e8;
  single.loss = 3;
  expect_data_error([&] { fit_scaling_laws({single}, {}); }, "1 point for 2 parameters");
  expect_data_error([] { fit_scaling_laws({}, {}); }, "no results");
  EXPECT_THROW(parse_prediction("big"), ConfigError);
  EXPECT_THROW(parse_prediction("1e9:0"), ConfigError);
  EXPECT_EQ(parse_prediction("1e9:dp").algorithm, "dp");
  EXPECT_EQ(parse_prediction("1e9:8").replicas, 8);
}

TEST(SimOptimiser, BfgsMinimisesRosenbrock) {
  Objective rosenbrock = [](const std::vector<double>& x, std::vector<double>* g) {
    double a = 1 - x[0], b = x[1] - x[0] * x[0];
    if (g != nullptr) *g = {-2 * a - 400 * x[0] * b, 200 * b};
    return a * a + 100 * b * b;
  };
  BfgsResult r = minimize_bfgs(rosenbrock, {-1.2, 1.0});
  EXPECT_TRUE(r.converged);
  EXPECT_NEAR(r.x[0], 1.0, 1e-6);
  EXPECT_NEAR(r.x[1], 1.0, 1e-6);
  EXPECT_LT(r.iterations, 200);
}

TEST(SimOptimiser, LeastSquaresAndHuber) {
  auto x = solve_least_squares({{1, 0}, {1, 1}, {1, 2}}, {1, 3, 5});
  ASSERT_TRUE(x.has_value());
  EXPECT_NEAR((*x)[0], 1, 1e-12);
  EXPECT_NEAR((*x)[1], 2, 1e-12);
  EXPECT_FALSE(solve_least_squares({{1, 2}, {2, 4}, {3, 6}}, {1, 2, 3}).has_value());
  EXPECT_DOUBLE_EQ(huber(0.5e-3, 1e-3), 0.5 * 0.25e-6);
  EXPECT_DOUBLE_EQ(huber(-3e-3, 1e-3), 1e-3 * (3e-3 - 0.5e-3));
  EXPECT_DOUBLE_EQ(huber_derivative(-3e-3, 1e-3), -1e-3);
}

}  // namespace
}  // namespace loco::sim
