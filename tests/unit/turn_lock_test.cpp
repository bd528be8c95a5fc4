// util/turn_lock.h: a second turn at one directory's work waits for the first to end (flock(2) locks belong to
// each open of the file, so two turns in one process wait for each other as two processes do).
#include "loco/util/turn_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "support/test_support.h"

namespace loco {
namespace {

TEST(TurnLock, ASecondTurnWaitsForTheFirstToEnd) {
  const test::ScratchDir dir;
  std::optional<TurnLock> first;
  first.emplace(dir.path(), "tables");
  std::atomic<bool> second_taken{false};
  std::thread second([&] {
    const TurnLock turn(dir.path(), "tables");
    second_taken = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(second_taken) << "the second turn did not wait for the first";
  first.reset();
  second.join();
  EXPECT_TRUE(second_taken);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / ".tables.turn"));
}

TEST(TurnLock, TurnsOfOtherNamesDoNotWait) {
  const test::ScratchDir dir;
  const TurnLock tables(dir.path(), "tables");
  std::atomic<bool> other_taken{false};
  std::thread other([&] {
    const TurnLock turn(dir.path(), "other");
    other_taken = true;
  });
  other.join();
  EXPECT_TRUE(other_taken);
}

}  // namespace
}  // namespace loco
