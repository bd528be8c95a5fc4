#include <gtest/gtest.h>

#include <cmath>

#include "loco/train/schedule.h"

namespace loco {
namespace {

OptimConfig schedule(const std::string& name) {
  OptimConfig o;
  o.lr = 1.0;
  o.min_lr_ratio = 0.1;
  o.warmup_steps = 10;
  o.decay_fraction = 0.2;
  o.schedule = name;
  return o;
}

// 110 steps: 10 of warmup, then 100 more (progress p = (s − 10)/99).
constexpr std::int64_t kSteps = 110;

TEST(Schedule, WarmupIsLinearFromTheFirstStep) {
  for (const char* name : {"cosine", "linear", "constant", "wsd"}) {
    EXPECT_DOUBLE_EQ(learning_rate(schedule(name), 0, kSteps), 0.1) << name;
    EXPECT_DOUBLE_EQ(learning_rate(schedule(name), 4, kSteps), 0.5) << name;
    EXPECT_DOUBLE_EQ(learning_rate(schedule(name), 9, kSteps), 1.0) << name;
  }
}

TEST(Schedule, CosineGoesFromPeakToFloor) {
  const auto o = schedule("cosine");
  EXPECT_DOUBLE_EQ(learning_rate(o, 10, kSteps), 1.0);
  EXPECT_NEAR(learning_rate(o, 10 + 99 / 3, kSteps), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 33.0 / 99.0)), 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate(o, kSteps - 1, kSteps), 0.1);
  EXPECT_GT(learning_rate(o, 40, kSteps), learning_rate(o, 41, kSteps));
}

TEST(Schedule, LinearDecaysEvenly) {
  const auto o = schedule("linear");
  EXPECT_NEAR(learning_rate(o, 10 + 33, kSteps), 0.1 + 0.9 * (1 - 33.0 / 99.0), 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate(o, kSteps - 1, kSteps), 0.1);
}

TEST(Schedule, ConstantStaysAtPeak) {
  EXPECT_DOUBLE_EQ(learning_rate(schedule("constant"), kSteps - 1, kSteps), 1.0);
}

TEST(Schedule, WsdIsStableThenDecaysOverTheLastFraction) {
  const auto o = schedule("wsd");  // decay over the last round(0.2·110) = 22 steps: 88 … 109
  EXPECT_DOUBLE_EQ(learning_rate(o, 87, kSteps), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 88, kSteps), 1.0);
  EXPECT_NEAR(learning_rate(o, 88 + 7, kSteps), 0.1 + 0.9 * (1 - 7.0 / 21.0), 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate(o, kSteps - 1, kSteps), 0.1);
}

}  // namespace
}  // namespace loco
