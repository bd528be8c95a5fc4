// The traffic each algorithm puts on a rank's link (note "traffic-model") and the link model that
// turns it into seconds; hand-computed cases.
#include <gtest/gtest.h>

#include <limits>

#include "loco/comm/link/link_fit.h"
#include "loco/comm/link/link_model.h"
#include "loco/comm/link/round_size.h"
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

TEST(RoundSize, ParsesAutoOffAndKib) {
  EXPECT_EQ(RoundSize::parse("auto", "k").mode, RoundSize::Mode::automatic);
  EXPECT_EQ(RoundSize::parse("off", "k").mode, RoundSize::Mode::whole);
  EXPECT_EQ(RoundSize::parse("0", "k").mode, RoundSize::Mode::whole);
  const RoundSize fixed = RoundSize::parse("32", "k");
  EXPECT_EQ(fixed.mode, RoundSize::Mode::fixed);
  EXPECT_EQ(fixed.bytes, 32 * 1024);
  EXPECT_EQ(RoundSize::parse("0.5", "k").bytes, 512);
  EXPECT_EQ(fixed.describe(), "32 KiB");
  for (const char* bad : {"-1", "fast", "", "32KiB", "1e30"}) {
    try {
      RoundSize::parse(bad, "comm.round_kib");
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("comm.round_kib"), std::string::npos) << e.what();
    }
  }
}

// The auto rule (round_size.h): R = max(4 KiB, B/8 · max(8 ms, L / (W_max − 1)) / (N − 1)).
TEST(RoundSize, AutoSizesRoundsFromTheLink) {
  const RoundSize automatic = RoundSize::parse("auto", "k");
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel(), 4), 0);  // no bandwidth: one round
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("100", "", 1), 1), 0);  // nobody to send to
  // 100 Mbit/s = 12.5 MB/s; 8 ms of it shared by 3 peers.
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("100", "", 4), 4), 33333);
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("1000", "", 2), 2), 1000000);
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("10", "", 2), 2), 10000);
  // 1 Mbit/s, 8 ranks: 143 bytes per peer would cost more in round trips than it saves; the floor.
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("1", "", 8), 8), 4096);
  // 50 ms of latency: rounds stay at 8 ms (it is hidden by rounds in flight, below). The slowest link counts.
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("100,50", "50,10", 2), 2), 50000);
  // 100 ms would need 14 rounds of 8 ms in flight; 7 rounds of 100/7 ms cover it.
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("10", "100", 2), 2), 17857);
  // A fixed size is taken as it is, whatever the link; off is one round.
  EXPECT_EQ(round_bytes_per_peer(RoundSize::parse("32", "k"), LinkModel(), 8), 32768);
  EXPECT_EQ(round_bytes_per_peer(RoundSize::parse("off", "k"), LinkModel::parse("10", "", 2), 2), 0);
}

// Note "measured-link": without a configured bandwidth, auto takes the measured link's B and L.
TEST(RoundSize, AutoTakesTheMeasuredLinkWhereNoneIsConfigured) {
  const RoundSize automatic = RoundSize::parse("auto", "k");
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel(), 2, LinkSpec{10e6, 0}), 10000);
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel(), 2, LinkSpec{10e6, 0.05}), 10000);
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel::parse("100", "", 4), 4, LinkSpec{10e6, 0}), 33333);
  EXPECT_EQ(round_bytes_per_peer(automatic, LinkModel(), 2, LinkSpec{1e18, 0}), 1 << 30);  // loopback
  EXPECT_EQ(round_bytes_per_peer(RoundSize::parse("off", "k"), LinkModel(), 2, LinkSpec{10e6, 0}), 0);
}

// Rounds in flight (round_size.h): W = min(8, 1 + ⌈L / t⌉), t a round's time on the wire.
TEST(RoundSize, RoundsInFlightCoverTheLatency) {
  const RoundSize automatic = RoundSize::parse("auto", "k");
  // No latency, or no link to size from: one round after another.
  EXPECT_EQ(rounds_in_flight(automatic, LinkModel::parse("10", "", 2), 2), 1);
  EXPECT_EQ(rounds_in_flight(automatic, LinkModel(), 2), 1);
  EXPECT_EQ(rounds_in_flight(RoundSize::parse("off", "k"), LinkModel::parse("10", "20", 2), 2), 1);
  // 10 Mbit/s, 2 ranks, 20 ms: rounds of 8 ms; 3 more cover 20 ms.
  EXPECT_EQ(rounds_in_flight(automatic, LinkModel::parse("10", "20", 2), 2), 4);
  // The same link shared by 3 peers: rounds are still 8 ms on the wire.
  EXPECT_EQ(rounds_in_flight(automatic, LinkModel::parse("10", "20", 4), 4), 4);
  // 100 ms: the cap, with longer rounds (above).
  EXPECT_EQ(rounds_in_flight(automatic, LinkModel::parse("10", "100", 2), 2), kMaxRoundsInFlight);
  // A fixed size where the bandwidth is known: 4 KiB at 1 Gbit/s is 33 µs on the wire; 1 MiB at 10 Mbit/s
  // is 839 ms, longer than the latency: one more round covers it. No bandwidth: one after another.
  EXPECT_EQ(rounds_in_flight(RoundSize::parse("4", "k"), LinkModel::parse("1000", "20", 2), 2), kMaxRoundsInFlight);
  EXPECT_EQ(rounds_in_flight(RoundSize::parse("1024", "k"), LinkModel::parse("10", "20", 2), 2), 2);
  EXPECT_EQ(rounds_in_flight(RoundSize::parse("4", "k"), LinkModel::parse("", "20", 2), 2), 1);
  // A measured link counts where none is configured.
  EXPECT_EQ(rounds_in_flight(automatic, LinkModel(), 2, LinkSpec{10e6, 0.02}), 4);
  EXPECT_EQ(rounds_in_flight(automatic, LinkModel(), 2, LinkSpec{10e6, 0}), 1);
}

// Rounds in flight hide all but one latency; one after another, each pays it.
TEST(LinkFit, WaitedRoundsCountsOneLatencyForRoundsInFlight) {
  EXPECT_EQ(LinkFit::waited_rounds(40, 1), 40);
  EXPECT_EQ(LinkFit::waited_rounds(40, 4), 1);
}

// seconds = 8·bytes/B + rounds·L, by hand.
TEST(LinkFit, FitsBandwidthAndLatencyToTheSamples) {
  LinkFit fit;
  EXPECT_FALSE(fit.estimate());
  // One sample cannot tell B from L: all of it is bandwidth. 1 MB in 1 s: 8 Mbit/s.
  fit.add({1e6, 1, 1.0});
  EXPECT_DOUBLE_EQ(fit.estimate()->bandwidth_bps, 8e6);
  EXPECT_EQ(fit.estimate()->latency_s, 0);
  // A link of 10 Mbit/s and 50 ms: 1 MB in one round 0.85 s, in 20 rounds 1.8 s.
  LinkFit exact;
  exact.add({1e6, 1, 0.85});
  exact.add({1e6, 20, 1.8});
  EXPECT_NEAR(exact.estimate()->bandwidth_bps, 10e6, 1e-3);
  EXPECT_NEAR(exact.estimate()->latency_s, 0.05, 1e-9);
  // Paced rounds faster than one burst (it lost packets): no negative latency, B from all the bytes.
  LinkFit bursty;
  bursty.add({1e6, 1, 1.2});
  bursty.add({1e6, 20, 0.8});
  EXPECT_EQ(bursty.estimate()->latency_s, 0);
  EXPECT_DOUBLE_EQ(bursty.estimate()->bandwidth_bps, 8e6);
  // Only the last 8 samples count: a wild first one is forgotten.
  LinkFit window;
  window.add({1e6, 1, 100.0});
  for (int i = 0; i < 4; ++i) {
    window.add({1e6, 1, 0.85});
    window.add({1e6, 20, 1.8});
  }
  EXPECT_NEAR(window.estimate()->bandwidth_bps, 10e6, 1e-3);
  // Note "link-stall": one phase 100 times slower than the fit (a silent link for a few seconds) is not fitted; three
  // in a row (a link that became slower) are, all three.
  LinkFit stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.add({1e6, 1, 0.85});
    stalled.add({1e6, 20, 1.8});
  }
  stalled.add({1e6, 1, 85.0});
  EXPECT_NEAR(stalled.estimate()->bandwidth_bps, 10e6, 1e-3);
  stalled.add({1e6, 20, 1.8});
  stalled.add({1e6, 1, 85.0});
  stalled.add({1e6, 1, 85.0});
  EXPECT_NEAR(stalled.estimate()->bandwidth_bps, 10e6, 1e-3);  // two in a row, then a usual one: still a stall
  stalled.add({1e6, 1, 0.85});
  for (int i = 0; i < 3; ++i) stalled.add({1e6, 1, 8.5});  // now 1 Mbit/s
  EXPECT_LT(stalled.estimate()->bandwidth_bps, 5e6);
  // Samples without time or bytes are no samples.
  LinkFit empty;
  empty.add({0, 1, 1.0});
  empty.add({1e6, 1, 0.0});
  empty.add({1e6, 1, std::numeric_limits<double>::infinity()});
  EXPECT_FALSE(empty.estimate());
}

}  // namespace
}  // namespace loco::comm
