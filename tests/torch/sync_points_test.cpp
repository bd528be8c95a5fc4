// When the DiLoCo family synchronises which fragments (src/loco/algo/sync_points.h), on hand-worked
// schedules: DiLoCo's every H steps and the last step; Streaming's fragments in turn (P = 2, H = 4:
// fragment 1 after steps 2, 6, 10, fragment 0 after 4, 8, and both after the last step, where only the
// scheduled ones count as scheduled).
#include "loco/algo/sync_points.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

using Fragments = std::vector<std::size_t>;

TEST(SyncPoints, OneFragmentFollowsTheDilocoSchedule) {
  SyncPoints points(SyncSchedule(4, 10));
  EXPECT_EQ(points.fragments(), 1u);
  EXPECT_TRUE(points.due(3).empty());
  EXPECT_EQ(points.due(4), Fragments{0});
  EXPECT_TRUE(points.scheduled(0, 4));
  EXPECT_EQ(points.next_after(0), 4);
  points.synced(4);
  EXPECT_EQ(points.next_after(4), 8);
  points.synced(8);
  EXPECT_EQ(points.due(10), Fragments{0});  // the last step
  EXPECT_FALSE(points.scheduled(0, 10));
  EXPECT_EQ(points.next_after(8), 10);  // capped at the last step
}

TEST(SyncPoints, FragmentsTakeTurnsAndAllSyncAtTheLastStep) {
  const SyncPoints points(2, 4, 11);
  EXPECT_TRUE(points.due(0).empty());
  EXPECT_TRUE(points.due(1).empty());
  EXPECT_EQ(points.due(2), Fragments{1});
  EXPECT_EQ(points.due(4), Fragments{0});
  EXPECT_EQ(points.due(6), Fragments{1});
  EXPECT_TRUE(points.due(7).empty());
  EXPECT_EQ(points.due(11), (Fragments{0, 1}));
  EXPECT_FALSE(points.scheduled(0, 11));
  EXPECT_FALSE(points.scheduled(1, 11));
  EXPECT_EQ(points.next_after(0), 2);
  EXPECT_EQ(points.next_after(2), 4);
  EXPECT_EQ(points.next_after(10), 11);
  EXPECT_EQ(points.next_after(11), 11);
}

// Overlapped DiLoCo's one fragment in turn needs no saved next point: the rule is t mod H = 0, after a
// resume too.
TEST(SyncPoints, OneFragmentInTurnIsEveryHSteps) {
  const SyncPoints points(1, 4, 10);
  EXPECT_TRUE(points.scheduled(0, 4));
  EXPECT_TRUE(points.scheduled(0, 8));
  EXPECT_FALSE(points.scheduled(0, 6));
  EXPECT_EQ(points.due(10), Fragments{0});
  EXPECT_EQ(points.every(), 4);
}

}  // namespace
}  // namespace loco
