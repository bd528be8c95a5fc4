// LocalGroup: collectives with known answers for world sizes 1–5 and every codec; timeouts, lost
// peers and mismatched collectives are reported as typed errors; byte and link accounting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "loco/comm/codecs/codec.h"
#include "loco/comm/comm_error.h"
#include "loco/comm/local/local_group.h"
#include "loco/comm/member_exchange.h"
#include "loco/comm/quantized_all_reduce.h"
#include "support/collective_checks.h"

namespace loco::comm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class LocalCollectives : public ::testing::TestWithParam<int> {};

TEST_P(LocalCollectives, KnownAnswers) { run_local_replicas(GetParam(), test::check_every_collective); }

TEST_P(LocalCollectives, QuantizedAllReduceEveryCodec) {
  run_local_replicas(GetParam(), [](Group& group) {
    for (const auto& codec : codec_names()) {
      for (auto count : test::collective_counts()) test::check_quantized_all_reduce(group, codec, count);
    }
  });
}

// Note "paced-exchange": rounds change neither the values nor the bytes, only how many collectives carry
// them; every codec, fp32's included.
TEST_P(LocalCollectives, PacedExchangeGivesTheSameBitsAndBytes) {
  const int n = GetParam();
  struct Outcome {
    std::vector<torch::Tensor> values;
    std::vector<CommStats> stats;
    std::vector<ExchangeTimes> times;
  };
  for (const auto& name : codec_names()) {
    const auto codec = make_codec(name);
    for (const std::int64_t count : {std::int64_t{1009}, std::int64_t{(1 << 16) + 3}}) {
      auto run = [&](const std::string& round_kib) {
        Outcome out{std::vector<torch::Tensor>(n), std::vector<CommStats>(n), std::vector<ExchangeTimes>(n)};
        GroupOptions options;
        options.round_size = RoundSize::parse(round_kib, "test");
        run_local_replicas(
            n,
            [&](Group& group) {
              const auto r = static_cast<std::size_t>(group.rank());
              auto generator = at::detail::createCPUGenerator(77 + r);
              out.values[r] = torch::randn({count}, generator) * (1.0 + group.rank());
              quantized_all_reduce(group, out.values[r], *codec, ReduceOp::mean, kGroupTimeout, &out.times[r]);
              out.stats[r] = group.stats();
            },
            options);
        return out;
      };
      const Outcome whole = run("off"), paced = run("1");
      // The largest piece, encoded: the span the phases cut into rounds of 1 KiB (all-to-all) and of
      // (N − 1) KiB (ring all-gather).
      const std::int64_t block = static_cast<std::int64_t>(codec->block_size());
      const std::int64_t piece = std::min(((count + n - 1) / n + block - 1) / block * block, count);
      const std::int64_t slot = static_cast<std::int64_t>(codec->encoded_bytes(static_cast<std::size_t>(piece)));
      for (int r = 0; r < n; ++r) {
        const auto i = static_cast<std::size_t>(r);
        const std::string what = name + ", rank " + std::to_string(r) + ", count " + std::to_string(count);
        EXPECT_TRUE(torch::equal(paced.values[i], whole.values[i])) << what;
        EXPECT_EQ(paced.stats[i].bytes_sent, whole.stats[i].bytes_sent) << what;
        EXPECT_EQ(paced.stats[i].bytes_recv, whole.stats[i].bytes_recv) << what;
        EXPECT_EQ(paced.times[i].round_bytes, 1024) << what;
        const std::int64_t ring_span = 1024 * std::max(n - 1, 1);
        EXPECT_EQ(paced.times[i].rounds, (slot + 1023) / 1024 + (slot + ring_span - 1) / ring_span) << what;
        EXPECT_EQ(paced.stats[i].operations, static_cast<std::uint64_t>(paced.times[i].rounds)) << what;
        EXPECT_EQ(whole.times[i].rounds, 2) << what;
      }
    }
  }
}

// Training's all-reduce (codec_all_reduce): fp32 takes the backend's ring, one operation, unless the
// group paces it in more than one round; then it goes in rounds like every codec, to the same values
// within fp32 rounding.
TEST(LocalGroupPacing, Fp32TakesTheRingOnlyWhenUnpaced) {
  // 20,000 bytes among 3 ranks: rounds of 1 KiB pace them; rounds of 64 KiB would be one round anyway.
  for (const char* round_kib : {"off", "1", "64"}) {
    GroupOptions options;
    options.round_size = RoundSize::parse(round_kib, "test");
    run_local_replicas(
        3,
        [&](Group& group) {
          auto values = torch::arange(5000, torch::kFloat32) * (group.rank() + 1);
          codec_all_reduce(group, values, nullptr, ReduceOp::mean);
          EXPECT_TRUE(torch::allclose(values, torch::arange(5000, torch::kFloat32) * 2.0, 1e-6)) << round_kib;
          if (std::string(round_kib) == "1") {
            EXPECT_GT(group.stats().operations, 10u);
            EXPECT_FALSE(uses_backend_ring(group, nullptr, 20000));
          } else {
            EXPECT_EQ(group.stats().operations, 1u) << round_kib;
            EXPECT_TRUE(uses_backend_ring(group, nullptr, 20000)) << round_kib;
          }
        },
        options);
  }
}

// Note "fp32-ring": with comm.round_kib = auto, fp32 rides the ring on links of 50 Mbit/s or more, where
// the pieces path's copies cost more than pacing saves; below, and for every codec, it is paced. 4 MB
// among 2 ranks: auto's rounds (9.8 KiB at 10 Mbit/s, 48.8 KiB at 50, 97.7 at 100) are far smaller.
TEST(LocalGroupPacing, Fp32RidesTheRingOnFastLinks) {
  const auto ring = [](const char* mbps, const char* round_kib, const Codec* codec) {
    GroupOptions options;
    options.link = LinkModel::parse(mbps, "", 2);
    options.round_size = RoundSize::parse(round_kib, "test");
    bool answer = false;
    run_local_replicas(
        2, [&](Group& group) { if (group.rank() == 0) answer = uses_backend_ring(group, codec, 4'000'000); }, options);
    return answer;
  };
  const auto fp4 = make_codec("fp4");
  EXPECT_FALSE(ring("10", "auto", nullptr));
  EXPECT_FALSE(ring("49", "auto", nullptr));
  EXPECT_TRUE(ring("50", "auto", nullptr));
  EXPECT_TRUE(ring("1000", "auto", nullptr));
  EXPECT_FALSE(ring("1000", "auto", fp4.get()));  // the codecs are always paced
  EXPECT_FALSE(ring("1000", "32", nullptr));      // a round size the user chose paces fp32 at any rate
  EXPECT_TRUE(ring("", "auto", nullptr));         // no link known: one round, the ring
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalCollectives, ::testing::Values(1, 2, 3, 4, 5));

TEST(LocalGroupFailures, MissingPeerTimesOutNamingIt) {
  run_local_replicas(3, [](Group& group) {
    if (group.rank() == 2) return;  // never joins the all-reduce (but stays in the group)
    auto tensor = torch::ones({4});
    const auto start = Clock::now();
    try {
      group.all_reduce(tensor, ReduceOp::sum, 200ms);
      ADD_FAILURE() << "all_reduce without rank 2 completed";
    } catch (const CommTimeout& e) {
      EXPECT_NE(std::string(e.what()).find("rank(s) 2"), std::string::npos) << e.what();
    }
    EXPECT_LT(seconds_since(start), 3.0);
  });
}

TEST(LocalGroupFailures, PeerThatLeavesIsReportedAsLost) {
  auto groups = make_local_groups(2);
  std::thread waiter([&] {
    auto tensor = torch::ones({4});
    const auto start = Clock::now();
    EXPECT_THROW(groups[0]->all_reduce(tensor, ReduceOp::sum, 30s), PeerLost);
    EXPECT_LT(seconds_since(start), 10.0);
    auto message = torch::empty({4});
    EXPECT_THROW(groups[0]->recv(message, 1, 0, 30s), PeerLost);
  });
  std::this_thread::sleep_for(100ms);
  groups[1].reset();  // rank 1's replica stops
  waiter.join();
}

TEST(LocalGroupFailures, ReceiveWithoutSenderTimesOut) {
  run_local_replicas(2, [](Group& group) {
    if (group.rank() == 1) return;
    auto message = torch::empty({3});
    EXPECT_THROW(group.recv(message, 1, 0, 100ms), CommTimeout);
  });
}

TEST(LocalGroupFailures, MismatchedCollectivesAreABug) {
  bool mismatch_reported = false;
  std::mutex mutex;
  run_local_replicas(2, [&](Group& group) {
    auto tensor = torch::ones({4});
    try {
      if (group.rank() == 0) group.all_reduce(tensor, ReduceOp::sum, 500ms);
      if (group.rank() == 1) group.broadcast(tensor, 0, 500ms);
      ADD_FAILURE() << "mismatched collectives completed";
    } catch (const InternalError& e) {
      std::lock_guard lock(mutex);
      mismatch_reported = std::string(e.what()).find("collective mismatch") != std::string::npos;
    } catch (const CommTimeout&) {
      // the rank that arrived first waits in vain
    }
  });
  EXPECT_TRUE(mismatch_reported);
}

TEST(LocalGroupAccounting, EmulatedLinkChargesRingTime) {
  GroupOptions options;
  options.link = LinkModel::parse("100", "10", 4);
  run_local_replicas(
      4,
      [](Group& group) {
        auto tensor = torch::ones({1 << 18});  // 1 MiB
        group.all_reduce(tensor);
        // 2·(N−1) rounds of 10 ms + 2·(N−1)/N·1 MiB at 100 Mbit/s.
        const double expected = 6 * 0.010 + 8.0 * (1.5 * 1048576) / 100e6;
        EXPECT_NEAR(group.stats().emulated_s, expected, 1e-9);
        EXPECT_EQ(group.stats().bytes_sent, 3u * 1048576u / 2u);
        EXPECT_EQ(group.stats().operations, 1u);
      },
      options);
}

TEST(LocalGroupAccounting, PerRankLinksChargeTheSlowest) {
  GroupOptions options;
  options.link = LinkModel::parse("1000,10", "1,5", 2);
  run_local_replicas(
      2,
      [](Group& group) {
        group.all_reduce(torch::ones({250}));  // 1000 bytes; ring moves 1000 each way
        EXPECT_NEAR(group.stats().emulated_s, 2 * 0.005 + 8.0 * 1000 / 10e6, 1e-12);
      },
      options);
}

TEST(LocalGroupAccounting, FullDelayMakesOperationsTakeTheEmulatedTime) {
  GroupOptions options;
  options.link = LinkModel::parse("1", "5", 2);  // 1 Mbit/s: 4 KiB each way takes 32.8 ms
  options.delay = LinkDelay::full;
  run_local_replicas(
      2,
      [](Group& group) {
        const auto start = Clock::now();
        group.all_reduce(torch::ones({1024}));
        const double emulated = 2 * 0.005 + 8.0 * 4096 / 1e6;
        EXPECT_NEAR(group.stats().emulated_s, emulated, 1e-12);
        EXPECT_GE(seconds_since(start), emulated - 1e-3);
        EXPECT_GE(group.stats().blocked_s, emulated - 1e-3);
      },
      options);
}

// A stop cuts the real-time wait of an emulated link short (a SIGTERM waited ~9000 s for a 1 kbit/s link):
// the result and the emulated clock are those of the whole wait.
TEST(LocalGroupAccounting, AStopCutsTheWaitForAnEmulatedLinkShort) {
  for (const LinkDelay delay : {LinkDelay::latency, LinkDelay::full}) {
    std::atomic<bool> stop{false};
    GroupOptions options;
    options.link = LinkModel::parse("0.001", "60000", 2);  // 1 kbit/s behind a minute: 4 KiB takes ~2 min
    options.delay = delay;
    options.stopping = [&stop] { return stop.load(); };
    std::thread stopper([&stop] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      stop = true;
    });
    run_local_replicas(
        2,
        [&](Group& group) {
          const auto start = Clock::now();
          auto values = torch::ones({1024});
          group.all_reduce(values);
          EXPECT_LT(seconds_since(start), 5.0) << "the link's wait went on after the stop";
          EXPECT_TRUE(torch::equal(values, torch::full({1024}, 2.0f)));
          EXPECT_GT(group.stats().emulated_s, 60.0);
        },
        options);
    stopper.join();
  }
}

// A link of `latency_ms` (and `bandwidth_mbps`, "" for none) whose latency is injected in real time.
GroupOptions injected_latency(const std::string& bandwidth_mbps, const std::string& latency_ms, int ranks) {
  GroupOptions options;
  options.link = LinkModel::parse(bandwidth_mbps, latency_ms, ranks);
  options.delay = LinkDelay::latency;
  return options;
}

// Waits on a thread that runs exchanges in the background are not the training's (comm_s): they count
// in background_s; what the training thread waits for them it records itself.
TEST(LocalGroupAccounting, BackgroundWaitsAreNotTheTrainings) {
  const GroupOptions options = injected_latency("", "30", 2);
  run_local_replicas(
      2,
      [](Group& group) {
        std::thread background([&group] {
          const BackgroundWaits outer;
          { const BackgroundWaits nested; }
          EXPECT_TRUE(BackgroundWaits::on_this_thread());  // the nested scope left the outer one in force
          group.all_reduce(torch::ones({8}));                // 2 rounds of 30 ms
        });
        background.join();
        // How long the wait took depends on when the thread entered it (the latency counts from the
        // transfer's end), but every wait() adds some time, here all to background_s.
        EXPECT_FALSE(BackgroundWaits::on_this_thread());
        EXPECT_EQ(group.stats().blocked_s, 0.0);
        const double background_s = group.stats().background_s;
        EXPECT_GT(background_s, 0.0);
        group.record_blocked(0.25);
        EXPECT_EQ(group.stats().blocked_s, 0.25);
        group.all_reduce(torch::ones({8}));  // on the training's thread
        EXPECT_GT(group.stats().blocked_s, 0.25);
        EXPECT_EQ(group.stats().background_s, background_s);
      },
      options);
}

// What sized an exchange's rounds, as metrics.jsonl and the log show it. 100 Mbit/s, 20 ms, 2 ranks:
// R = 100e6 / 8 · 8 ms = 100,000 B per peer; a round is 8 ms on the wire, so W = 1 + ⌈20 / 8⌉ = 4.
TEST(LocalGroupAccounting, PacingSaysWhatSizedTheRounds) {
  GroupOptions options;
  options.link = LinkModel::parse("100", "20", 2);
  options.round_size = RoundSize::parse("auto", "comm.round_kib");
  run_local_replicas(
      2,
      [](Group& group) {
        EXPECT_FALSE(group.last_pacing());
        const Pacing pacing = group.pacing(2);
        EXPECT_EQ(pacing.round_bytes, 100000);
        EXPECT_EQ(pacing.in_flight, 4);
        EXPECT_EQ(pacing.describe(),
                  "rounds of 97.66 KiB per peer among 2 ranks, 4 in flight (link 100 Mbit/s, 20 ms, configured)");
        ASSERT_TRUE(group.last_pacing());
        EXPECT_EQ(group.last_pacing()->describe(), pacing.describe());
      },
      options);
  run_local_replicas(2, [](Group& group) {  // no link, one round
    EXPECT_EQ(group.pacing(2).describe(), "one round among 2 ranks, 1 in flight (no link known)");
  });
}

TEST(LocalGroupAccounting, LatencyDelayAddsRoundsTimesLatency) {
  const GroupOptions options = injected_latency("", "20", 3);
  run_local_replicas(
      3,
      [](Group& group) {
        const auto start = Clock::now();
        group.all_reduce(torch::ones({8}));  // 4 rounds
        EXPECT_GE(seconds_since(start), 4 * 0.020 - 1e-3);
      },
      options);
}

// Note "latency-injection" with rounds in flight (link/round_size.h): 8 + 8 rounds of 4 KiB behind 100 ms
// keep all of a phase's rounds in flight, so the exchange waits about one latency per phase (0.2 s), not
// one per round (1.6 s, as before rounds were in flight); with the bandwidth emulated too (`full`), each
// round's bytes follow the previous round's, not its latency.
TEST(LocalGroupAccounting, RoundsInFlightPayTheLatencyOncePerPhase) {
  for (const LinkDelay delay : {LinkDelay::latency, LinkDelay::full}) {
    GroupOptions options;
    options.link = LinkModel::parse("1000", "100", 2);
    options.delay = delay;
    options.round_size = RoundSize::parse("4", "test");
    run_local_replicas(
        2,
        [&](Group& group) {
          ASSERT_EQ(group.rounds_in_flight(2), kMaxRoundsInFlight);
          const auto values = torch::ones({16384});  // fp32: pieces of 32 KiB, 8 rounds each way
          ExchangeTimes times;
          const auto start = Clock::now();
          quantized_all_reduce(group, values, *make_codec("fp32"), ReduceOp::sum, kGroupTimeout, &times);
          const double elapsed = seconds_since(start);
          EXPECT_TRUE(torch::equal(values, torch::full({16384}, 2.0f)));
          EXPECT_EQ(times.rounds, 16);
          EXPECT_GE(elapsed, 2 * 0.1 - 1e-3);
          EXPECT_LT(elapsed, 0.8) << "rounds waited out one latency each";
        },
        options);
  }
}

// The same for NoLoCo's pair exchange (member_exchange.h): 8 rounds of 4 KiB behind 100 ms, sent and
// received with all 8 in flight, wait about one latency (0.1 s), not one per round (0.8 s).
TEST(LocalGroupAccounting, PairExchangeKeepsItsRoundsInFlight) {
  GroupOptions options = injected_latency("1000", "100", 2);
  options.round_size = RoundSize::parse("4", "test");
  run_local_replicas(
      2,
      [&](Group& group) {
        ASSERT_EQ(group.rounds_in_flight(2), kMaxRoundsInFlight);
        const auto mine = torch::full({8192}, static_cast<float>(group.rank() + 1));  // 32 KiB: 8 rounds
        const auto start = Clock::now();
        const auto theirs = exchange_among(group, mine, {0, 1}, GroupWide::no);
        const double elapsed = seconds_since(start);
        EXPECT_TRUE(torch::equal(theirs[static_cast<std::size_t>(1 - group.rank())],
                                 torch::full({8192}, static_cast<float>(2 - group.rank()))));
        EXPECT_EQ(group.stats().operations, 16u);  // a send and a receive per round
        EXPECT_GE(elapsed, 0.1 - 1e-3);
        EXPECT_LT(elapsed, 0.5) << "rounds waited out one latency each";
      },
      options);
}

}  // namespace
}  // namespace loco::comm
