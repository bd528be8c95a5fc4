// RetryPacing (note "retry-pacing"): the pauses between attempts of a synchronisation, and when it gives up.
#include "loco/membership/retry_rules.h"

#include <gtest/gtest.h>

#include <string>

#include "loco/util/error.h"
#include "loco/util/stop_requested.h"

namespace loco::membership {
namespace {

TEST(RetryPacing, TheFirstRetryGoesAtOnceAndLaterOnesBackOffToTwoSeconds) {
  RetryPacing retries(600);
  EXPECT_EQ(retries.pause_s(), 0);
  const double expected[] = {0, 0.1, 0.2, 0.4, 0.8, 1.6, 2, 2};
  double now = 0;
  for (const double pause : expected) {
    retries.failed(now, "a member left");
    EXPECT_DOUBLE_EQ(retries.pause_s(), pause) << "after " << retries.failures() << " failures";
    now += 0.01;
  }
  for (int i = 0; i < 1000; ++i) retries.failed(now, "again");  // no overflow of the doubling
  EXPECT_DOUBLE_EQ(retries.pause_s(), 2);
}

TEST(RetryPacing, FailuresForLongerThanTheTimeoutGiveUpNamingTheLastOne) {
  RetryPacing retries(10);
  retries.give_up_if_exhausted(7, 1e6);  // no failure yet: a long wait for the first quorum is not one
  retries.failed(100, "first");
  retries.failed(105, "a member left");
  retries.give_up_if_exhausted(7, 130);  // churn: two failures, however long they took (each waited for a quorum)
  for (int i = 0; i < 7; ++i) retries.failed(106 + i * 0.1, "");
  retries.failed(109, "rank 1 did not come to the rendezvous within 5 s");
  retries.give_up_if_exhausted(7, 110);  // ten failures, for exactly the timeout: not yet
  try {
    retries.give_up_if_exhausted(7, 110.5);
    FAIL() << "ten failures for 10.5 s of a 10 s timeout went on";
  } catch (const GaveUpWaiting& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("the synchronisation at step 7 failed 10 times in a row over 10 s"), std::string::npos)
        << message;
    EXPECT_NE(message.find("comm.timeout_s (10 s)"), std::string::npos) << message;
    EXPECT_NE(message.find("the last failure: rank 1 did not come to the rendezvous within 5 s"), std::string::npos)
        << message;
  }
}

TEST(RetryPacing, AnAttemptThatFailedWithoutAReasonIsStillNamed) {
  RetryPacing retries(1);
  for (int i = 0; i < 10; ++i) retries.failed(0, "");
  EXPECT_THROW(
      {
        try {
          retries.give_up_if_exhausted(3, 2);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("the last failure: an attempt that was not committed"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace loco::membership
