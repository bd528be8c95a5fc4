// Note "graceful-stop": the steps at which replicas check together for a stop (train/stop_checks.h), by hand.
#include "loco/train/stop_checks.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

using Check = StopChecks::Check;

TEST(StopChecks, WhereTheReplicasMeetOrEveryFewStepsUnlessAnExchangeIsInFlight) {
  StopChecks checks(/*every=*/8, /*first_step=*/0);
  EXPECT_EQ(checks.at(3, /*alone=*/true, false, true), Check::now);          // one replica: every step
  EXPECT_EQ(checks.at(3, false, /*synchronised=*/true, false), Check::now);  // they met
  EXPECT_EQ(checks.at(3, false, false, false), Check::none);                 // not a check step
  EXPECT_EQ(checks.at(8, false, false, false), Check::now);
  EXPECT_EQ(checks.at(8, false, false, /*exchanging=*/true), Check::after_settling);  // 8 steps without a check
  checks.checked(4);
  EXPECT_EQ(checks.at(8, false, false, true), Check::none);  // checked 4 steps ago: skipped
  EXPECT_EQ(checks.at(16, false, false, true), Check::after_settling);
  EXPECT_EQ(StopChecks(0, 0).at(64, false, false, false), Check::none);  // 0: only where they meet
}

}  // namespace
}  // namespace loco
