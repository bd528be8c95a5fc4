// The parts the strategies share, on known cases: NoLoCo's pairing, the synchronisation schedule
// (fixed H and the Quadratic Synchronisation Rule, docs/algorithm-reference.md §6), dist.check_sync's detector,
// the emulated link's timeline and Streaming DiLoCo's τ auto.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>

#include "loco/algo/link_timeline.h"
#include "loco/algo/overlap_auto.h"
#include "loco/algo/pairing.h"
#include "loco/algo/replica_hash.h"
#include "loco/algo/sync_schedule.h"
#include "loco/comm/local/local_group.h"
#include "loco/util/error.h"

namespace loco {
namespace {

// Every replica in exactly one group; pairs, plus one group of three for odd M; same on every call.
TEST(Pairing, PartitionsReplicasIntoPairsAndOneThreeForOddM) {
  for (int m : {1, 2, 3, 4, 7, 8}) {
    for (std::int64_t step = 0; step < 5; ++step) {
      const auto groups = replica_groups(42, step, m);
      EXPECT_EQ(groups, replica_groups(42, step, m));
      std::vector<int> seen;
      int threes = 0;
      for (const auto& g : groups) {
        EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
        EXPECT_TRUE(g.size() == 2 || g.size() == 3 || m == 1) << "M=" << m;
        threes += g.size() == 3;
        seen.insert(seen.end(), g.begin(), g.end());
        for (int r : g) EXPECT_EQ(group_of(groups, r), g);
      }
      std::sort(seen.begin(), seen.end());
      std::vector<int> all(static_cast<std::size_t>(m));
      for (int r = 0; r < m; ++r) all[static_cast<std::size_t>(r)] = r;
      EXPECT_EQ(seen, all) << "M=" << m;
      EXPECT_EQ(threes, m > 1 && m % 2 == 1 ? 1 : 0) << "M=" << m;
    }
  }
}

// The partners change from one outer step to the next (a fixed pairing would never mix the halves).
TEST(Pairing, ChangesWithTheOuterStep) {
  int different = 0;
  for (std::int64_t step = 1; step < 20; ++step) different += replica_groups(7, step, 8) != replica_groups(7, 0, 8);
  EXPECT_GE(different, 15);
}

TEST(SyncSchedule, FixedEveryHAndAtTheLastStep) {
  SyncSchedule s(30, 100);
  std::vector<std::int64_t> syncs;
  for (std::int64_t step = 1; step <= 100; ++step) {
    if (s.due(step)) {
      syncs.push_back(step);
      s.synced(step);
    }
  }
  EXPECT_EQ(syncs, (std::vector<std::int64_t>{30, 60, 90, 100}));
}

// Constant lr 0.01 and α = 0.2: (α / lr)² = 400 > H_base, capped by the steps left; H_base in warmup.
TEST(SyncSchedule, QuadraticRuleGrowsHAsTheLearningRateFalls) {
  OptimConfig optim;
  optim.schedule = "constant";
  optim.lr = 0.01;
  optim.warmup_steps = 10;
  const SyncSchedule s(4, 0.2, optim, 1000);
  EXPECT_EQ(s.interval_after(0), 4);      // warmup: H_base
  EXPECT_EQ(s.interval_after(10), 400);   // floor((0.2 / 0.01)²)
  EXPECT_EQ(s.interval_after(900), 100);  // capped by the 100 steps left
  optim.lr = 0.2;                         // (α / lr)² = 1 < H_base
  EXPECT_EQ(SyncSchedule(4, 0.2, optim, 1000).interval_after(10), 4);
}

// A replica whose tensor differs is named; identical tensors pass.
TEST(ReplicaHash, NamesTheReplicasThatDiffer) {
  std::atomic<int> failures{0};
  comm::run_local_replicas(3, [&](comm::Group& group) {
    const torch::Tensor same = torch::arange(10, torch::kFloat32);
    require_identical_across_replicas(group, same, "identical tensors");
    torch::Tensor mine = same.clone();
    if (group.rank() == 2) mine[3] = 3.5f;
    try {
      require_identical_across_replicas(group, mine, "test tensors");
    } catch (const InternalError& e) {
      EXPECT_NE(std::string(e.what()).find("test tensors of replicas 2 differ"), std::string::npos) << e.what();
      ++failures;
    }
  });
  EXPECT_EQ(failures, 3);
}

// Exchanges queue on the link one after another, compute meanwhile hides their link time, and a wait
// moves the clock to when the link is free (note "emulated-wall-clock").
// Note "overlap-auto": τ = min(τ_max, max(1, ⌈1.1·E/s⌉)), by hand.
TEST(OverlapAuto, SmallestOverlapThatHidesTheExchange) {
  EXPECT_EQ(overlap_to_hide({2.0, 0.5}, 99), 5);    // ⌈4.4⌉
  EXPECT_EQ(overlap_to_hide({0.5, 0.5}, 99), 2);    // ⌈1.1⌉: the margin asks for one more step
  EXPECT_EQ(overlap_to_hide({0.45, 0.5}, 99), 1);   // ⌈0.99⌉
  EXPECT_EQ(overlap_to_hide({0.0, 0.5}, 99), 1);    // an instant exchange still overlaps one step
  EXPECT_EQ(overlap_to_hide({100.0, 0.01}, 9), 9);  // capped at sync_every − 1
  EXPECT_EQ(overlap_to_hide({1e300, 1e-300}, 9), 9);  // no overflow on the way
  EXPECT_EQ(overlap_to_hide({2.0, 0.0}, 99), std::nullopt);  // no step measured: keep τ
}

// τ rises at once and falls one step per exchange.
TEST(OverlapAuto, RisesAtOnceFallsOneStepAtATime) {
  EXPECT_EQ(next_overlap({2.0, 0.5}, 1, 99), 5);  // τ_hide = 5
  EXPECT_EQ(next_overlap({0.1, 0.5}, 5, 99), 4);  // τ_hide = 1
  EXPECT_EQ(next_overlap({0.1, 0.5}, 1, 99), 1);
  EXPECT_EQ(next_overlap({100.0, 0.01}, 3, 9), 9);
  EXPECT_EQ(next_overlap({2.0, 0.0}, 3, 99), 3);  // no step measured
}

TEST(OverlapAuto, StepDurationsGiveTheMedianAndForget) {
  StepDurations steps;
  EXPECT_EQ(steps.take_median(), 0.0);
  for (double s : {0.3, 0.1, 9.0, 0.2, 0.25}) steps.record(s);  // 9 s: a step that also evaluated
  EXPECT_EQ(steps.take_median(), 0.25);
  steps.record(0.4);
  steps.record(0.2);
  steps.record(0.6);
  EXPECT_EQ(steps.median(), 0.4);  // looks without forgetting
  EXPECT_EQ(steps.take_median(), 0.4);
  EXPECT_EQ(steps.median(), 0.0);
}

// A first exchange's E (note "overlap-auto", first exchanges), by hand: 1.25 MB per replica among 2 on
// 10 Mbit/s with 20 ms is the ring's 2·(1/2)·1.25 MB = 1 s of bytes and 2 rounds of 20 ms, 1.04 s, times
// 1.4; a measured exchange of 0.5 MB in 2 s, scaled to 1.25 MB, is 5 s and wins over the configured link.
TEST(OverlapAuto, PredictsAnExchangeNotYetMeasured) {
  const auto link = comm::LinkModel::parse("10", "20", 2);
  EXPECT_NEAR(*predicted_exchange_seconds(1'250'000, 2, std::nullopt, link), 1.4 * 1.04, 1e-12);
  const MeasuredExchange measured{2.0, 500'000};
  EXPECT_NEAR(*predicted_exchange_seconds(1'250'000, 2, measured, link), 5.0, 1e-12);
  EXPECT_NEAR(*predicted_exchange_seconds(1'250'000, 2, measured, comm::LinkModel()), 5.0, 1e-12);
  // 4 replicas: 2·(3/4) of the bytes, 6 rounds.
  EXPECT_NEAR(*predicted_exchange_seconds(1'250'000, 4, std::nullopt, comm::LinkModel::parse("10", "20", 4)),
              1.4 * (1.5 + 0.12), 1e-12);
  EXPECT_EQ(predicted_exchange_seconds(1'250'000, 2, std::nullopt, comm::LinkModel()), std::nullopt);
  EXPECT_EQ(predicted_exchange_seconds(1'250'000, 2, std::nullopt, comm::LinkModel::parse("", "20", 2)),
            std::nullopt);  // a latency alone says nothing of the bytes
}

// Every replica learns the exchange as the replica that sent last saw it (the least E: the others' E held
// their wait for it) and the slowest step, each from another replica.
TEST(OverlapAuto, TimingAcrossTakesTheLastSendersExchangeAndTheSlowestStep) {
  std::vector<ExchangeTiming> seen(3);
  comm::run_local_replicas(3, [&](comm::Group& group) {
    const double r = group.rank();
    seen[static_cast<std::size_t>(group.rank())] = timing_across(group, {3.0 - r, 8.0 + r});
  });
  for (const auto& timing : seen) {
    EXPECT_EQ(timing.exchange_s, 1.0);
    EXPECT_EQ(timing.step_s, 10.0);
  }
}

TEST(LinkTimeline, ExchangesQueueAndWaitsMoveTheClock) {
  comm::GroupOptions options;
  options.link = comm::LinkModel::parse("8", "", 2);
  comm::run_local_replicas(
      2,
      [](comm::Group& group) {
        double compute = 0;
        EmulatedClock clock([&compute] { return compute; });
        LinkTimeline link(clock);
        torch::Tensor values = torch::ones({250000});
        const double one = LinkTimeline::charged_seconds(group, [&] { group.all_reduce(values); });
        EXPECT_GT(one, 0.1);  // 1 MB at 8 Mbit/s, in a ring of two
        link.queue(group, [&] { group.all_reduce(values); });
        EXPECT_DOUBLE_EQ(link.free_at(), one);
        compute = one / 2;  // half of it hidden by compute; the next one queues behind it
        link.queue(group, [&] { group.all_reduce(values); });
        EXPECT_DOUBLE_EQ(link.free_at(), 2 * one);
        link.wait();
        EXPECT_DOUBLE_EQ(clock.now(), 2 * one);
        compute = one;  // the clock is past the link: a blocking exchange starts now
        const double before = clock.now();
        link.exchange_and_wait(group, [&] { group.all_reduce(values); });
        EXPECT_DOUBLE_EQ(clock.now(), before + one);
        EXPECT_DOUBLE_EQ(link.free_at(), before + one);
      },
      options);
}

}  // namespace
}  // namespace loco
