// The traffic each algorithm puts on a rank's link (note "traffic-model") and the link model that
// turns it into seconds; hand-computed cases.
#include <gtest/gtest.h>

#include "loco/comm/link/link_model.h"
#include "loco/comm/link/traffic.h"
#include "loco/util/error.h"

namespace loco::comm {
namespace {

TEST(Traffic, RingAllReduceMovesTwiceTheShareOfOthers) {
  const auto traffic = ring_all_reduce_traffic(1200, 4);  // 2·3/4·1200
  EXPECT_EQ(traffic.bytes_sent, 1800u);
  EXPECT_EQ(traffic.bytes_recv, 1800u);
  EXPECT_EQ(traffic.rounds, 6);
  EXPECT_EQ(ring_all_reduce_traffic(1200, 1).bytes_sent, 0u);
  EXPECT_EQ(ring_all_reduce_traffic(1200, 1).rounds, 0);
}

TEST(Traffic, RingAllGatherForwardsEveryOtherPiece) {
  const auto traffic = ring_all_gather_traffic(100, 5);
  EXPECT_EQ(traffic.bytes_sent, 400u);
  EXPECT_EQ(traffic.bytes_recv, 400u);
  EXPECT_EQ(traffic.rounds, 4);
}

TEST(Traffic, AllToAllCountsOnlyOtherRanksPieces) {
  const auto traffic = all_to_all_traffic({10, 20, 30}, {1, 2, 3}, 1);
  EXPECT_EQ(traffic.bytes_sent, 40u);
  EXPECT_EQ(traffic.bytes_recv, 4u);
  EXPECT_EQ(traffic.rounds, 1);
}

TEST(Traffic, BinomialBroadcastTreeOfFive) {
  // Root 0 sends to 1, 2, 4; rank 1 to 3; ranks 2, 3, 4 send nothing. Shifted by the root.
  const std::uint64_t sent[] = {3, 1, 0, 0, 0};
  for (int relative = 0; relative < 5; ++relative) {
    const int rank = (relative + 2) % 5;
    const auto traffic = binomial_broadcast_traffic(10, rank, 2, 5);
    EXPECT_EQ(traffic.bytes_sent, 10 * sent[relative]) << "relative rank " << relative;
    EXPECT_EQ(traffic.bytes_recv, relative == 0 ? 0u : 10u) << "relative rank " << relative;
    EXPECT_EQ(traffic.rounds, 3);
  }
}

TEST(Traffic, PointToPointAndBarrier) {
  EXPECT_EQ(point_to_point_traffic(5, 0).bytes_sent, 5u);
  EXPECT_EQ(point_to_point_traffic(0, 7).bytes_recv, 7u);
  EXPECT_EQ(barrier_traffic(8).rounds, 3);
  EXPECT_EQ(barrier_traffic(1).rounds, 0);
}

TEST(LinkModel, UniformLinkTimesRoundsAndBytes) {
  const auto link = LinkModel::parse("100", "50", 4);
  const Traffic traffic{1'000'000, 500'000, 6};
  // 6 rounds of 50 ms + 8 Mbit at 100 Mbit/s (the larger direction).
  EXPECT_NEAR(link.collective_seconds(traffic), 0.3 + 0.08, 1e-12);
  EXPECT_EQ(link.describe(), "100 Mbit/s, 50 ms");
}

TEST(LinkModel, PerRankLinksUseTheSlowestForCollectivesAndThePairForMessages) {
  const auto link = LinkModel::parse("1000,10,100", "1,2,30", 3);
  const Traffic traffic{1'000'000, 0, 1};
  EXPECT_NEAR(link.collective_seconds(traffic), 0.030 + 0.8, 1e-12);
  EXPECT_NEAR(link.message_seconds(0, 2, traffic), 0.030 + 0.08, 1e-12);
  EXPECT_NEAR(link.message_seconds(0, 1, traffic), 0.002 + 0.8, 1e-12);
  EXPECT_DOUBLE_EQ(link.slowest_bandwidth_bps(), 10e6);
  EXPECT_DOUBLE_EQ(link.highest_latency_s(), 0.030);
}

TEST(LinkModel, EmptyMeansIdeal) {
  const auto link = LinkModel::parse("", "", 2);
  EXPECT_FALSE(link.emulates_anything());
  EXPECT_EQ(link.collective_seconds({1'000'000, 1'000'000, 4}), 0.0);
  EXPECT_EQ(link.describe(), "no emulated link");
  const auto latency_only = LinkModel::parse("", "10", 2);
  EXPECT_NEAR(latency_only.collective_seconds({1'000'000, 0, 2}), 0.02, 1e-12);
}

TEST(LinkModel, BadListsNameTheProblem) {
  EXPECT_THROW(LinkModel::parse("fast", "", 2), ConfigError);
  EXPECT_THROW(LinkModel::parse("-5", "", 2), ConfigError);
  EXPECT_THROW(LinkModel::parse("100,100,100", "", 2), ConfigError);
  try {
    LinkModel::parse("", "1,2", 4);
    FAIL() << "two latencies for four ranks accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("2 values for 4 ranks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loco::comm
