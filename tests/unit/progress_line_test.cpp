// The notice that a silent step is still running (data/progress_line.h PeriodicNotice).
#include "loco/data/progress_line.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace loco::data {
namespace {

TEST(PeriodicNotice, SaysTheStepIsStillRunningUntilItEnds) {
  testing::internal::CaptureStderr();
  {
    const PeriodicNotice notice("training the tokenizer", "a hint", 0.05);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("prepare: training the tokenizer: 0 s so far; a hint\n"), std::string::npos) << said;
  // A step shorter than the interval says nothing, and the notice ends at once (not after its interval).
  testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  { const PeriodicNotice quiet("training the tokenizer", "a hint", 30); }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace loco::data
