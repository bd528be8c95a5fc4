// One rank of a multi-process test: started N times by `loco launch` (tests/CMakeLists.txt), each
// rank joins a Gloo group over loopback and runs the same checks as the in-process tests
// (support/collective_checks.h), then compares its results with a LocalGroup of the same size
// simulated in this process: both backends must give the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "loco/comm/codecs/codec.h"
#include "loco/comm/comm_error.h"
#include "loco/comm/c10d/connect.h"
#include "loco/comm/local/local_group.h"
#include "loco/comm/member_exchange.h"
#include "loco/pipeline/stages/activation_link.h"
#include "support/collective_checks.h"

namespace loco::comm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// One group per process, joined by the first test that needs it: rank 0's store lives as long as
// the group, so a second rendezvous on the same port could meet the first store still shutting down.
Group& world() {
  static const std::unique_ptr<Group> group = [] {
    const auto environment = comm::rank_environment_from_env();
    if (!environment) throw std::runtime_error("run this test through `loco launch --nproc N -- <this binary>`");
    torch::set_num_threads(1);  // several ranks share 2 cores
    GroupOptions options;
    options.timeout = 60s;
    return connect_from_environment(*environment, "gloo", options, 60s);
  }();
  return *group;
}

TEST(GlooCollectives, KnownAnswers) { test::check_every_collective(world()); }

TEST(GlooCollectives, QuantizedAllReduceMatchesLocalGroupBitForBit) {
  Group& group = world();
  for (const auto& codec : codec_names()) {
    for (auto count : test::collective_counts()) {
      const auto over_gloo = test::check_quantized_all_reduce(group, codec, count);
      torch::Tensor in_process;
      run_local_replicas(group.size(), [&](Group& local) {
        auto result = test::check_quantized_all_reduce(local, codec, count);
        if (local.rank() == group.rank()) in_process = result;
      });
      EXPECT_TRUE(torch::equal(over_gloo, in_process)) << codec << ", count " << count;
    }
  }
}

// A group of the test's own, with comm.round_kib = `round_kib`: its own rendezvous, so such a test runs
// alone in its processes (a ctest of its own).
std::unique_ptr<Group> own_gloo_group(const std::string& round_kib, const std::string& latency_ms = "") {
  const auto environment = comm::rank_environment_from_env();
  if (!environment) {
    ADD_FAILURE() << "run this test through `loco launch --nproc N -- <this binary>`";
    return nullptr;
  }
  torch::set_num_threads(1);
  GroupOptions options;
  options.timeout = 60s;
  options.round_size = RoundSize::parse(round_kib, "test");
  if (!latency_ms.empty()) options.link = LinkModel::parse("1000", latency_ms, environment->world_size);
  return connect_from_environment(*environment, "gloo", options, 60s);
}

// Every codec and size through `group`, paced, gives the bits and bytes of an unpaced LocalGroup.
void check_paced_matches_unpaced_local_group(Group& group) {
  for (const auto& codec : codec_names()) {
    for (auto count : test::collective_counts()) {
      const auto before = group.stats();
      const auto over_gloo = test::check_quantized_all_reduce(group, codec, count);
      const auto paced_ops = group.stats().operations - before.operations;
      torch::Tensor in_process;
      std::uint64_t unpaced_ops = 0;
      run_local_replicas(group.size(), [&](Group& local) {
        auto result = test::check_quantized_all_reduce(local, codec, count);
        if (local.rank() == group.rank()) {
          in_process = result;
          unpaced_ops = local.stats().operations;
        }
      });
      EXPECT_TRUE(torch::equal(over_gloo, in_process)) << codec << ", count " << count;
      // Large tensors went in many rounds (the check's own broadcast and counts are the same in both).
      if (count > 100000) {
        EXPECT_GT(paced_ops, unpaced_ops + 50) << codec;  // fp4 on 3 ranks: 45 all-to-all rounds of 1000 bytes, 23 ring rounds of 2000
      }
    }
  }
}

// A group paced in rounds of 1000 bytes per peer (note "paced-exchange") gives the bits and bytes of an
// unpaced LocalGroup.
TEST(GlooPaced, QuantizedAllReduceMatchesUnpacedLocalGroup) {
  const auto group = own_gloo_group("0.9765625");  // 1000 bytes
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(group->round_bytes_per_peer(4), 1000);
  ASSERT_EQ(group->rounds_in_flight(group->size()), 1);
  check_paced_matches_unpaced_local_group(*group);
}

// Rounds in flight (link/round_size.h): with a configured latency, up to kMaxRoundsInFlight rounds of an
// exchange run at once on Gloo's threads (the latency is not injected: the loopback link is used as it
// is), with the bits of an unpaced LocalGroup still.
TEST(GlooRoundsInFlight, QuantizedAllReduceMatchesUnpacedLocalGroup) {
  const auto group = own_gloo_group("0.9765625", "20");  // 1000 bytes at 1 Gbit/s: 16 µs per peer
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(group->rounds_in_flight(group->size()), kMaxRoundsInFlight);
  check_paced_matches_unpaced_local_group(*group);
}

// Note "measured-link": with auto rounds and no configured link, a group of processes learns its link
// from its large exchanges: the first runs unpaced and is measured, every rank then holds the same
// estimate and sizes the next exchanges' rounds from it, with the bits of an unpaced LocalGroup still.
// Simulated replicas (LocalGroup) have no link to measure.
TEST(GlooMeasuredLink, AutoLearnsTheLinkFromLargeExchanges) {
  const auto group = own_gloo_group("auto");
  ASSERT_NE(group, nullptr);
  const GroupOptions& options = group->options();
  ASSERT_TRUE(group->measures_link());
  EXPECT_EQ(group->round_bytes_per_peer(group->size()), 0);
  test::check_quantized_all_reduce(*group, "int8", 1000);  // a few KB: too small to tell anything
  EXPECT_FALSE(group->measured_link().estimate());
  for (const std::string codec : {"fp32", "int8"}) {
    const auto over_gloo = test::check_quantized_all_reduce(*group, codec, 1 << 20);
    ASSERT_TRUE(group->measured_link().estimate()) << codec;
    const std::int64_t round_bytes = group->round_bytes_per_peer(group->size());
    EXPECT_GT(round_bytes, 0) << codec;
    EXPECT_TRUE(group->ranks_differing_from_rank_0(round_bytes).empty()) << codec;
    torch::Tensor in_process;
    run_local_replicas(
        group->size(),
        [&](Group& local) {
          EXPECT_FALSE(local.measures_link());
          auto result = test::check_quantized_all_reduce(local, codec, 1 << 20);
          if (local.rank() == group->rank()) in_process = result;
        },
        options);
    EXPECT_TRUE(torch::equal(over_gloo, in_process)) << codec;
  }
}

// Note "measured-link" for NoLoCo's exchange within pairs (comm/member_exchange.h): exchanges the whole
// group makes at once teach it the link as its collectives do; one that is not group-wide (elastic NoLoCo,
// where healed members sit out) teaches nothing. Run with an even number of ranks: pairs (0, 1), (2, 3), ...
TEST(GlooMeasuredPairs, GroupWidePairExchangesLearnTheLink) {
  const auto group = own_gloo_group("auto");
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(group->size() % 2, 0);
  const int me = group->rank(), partner = me ^ 1;
  const std::vector<int> pair = {std::min(me, partner), std::max(me, partner)};
  const std::size_t partner_index = me < partner ? 1 : 0;
  auto values_of = [](int rank) { return torch::arange(1 << 18, torch::kFloat32).add_(0.5 * rank); };  // 1 MiB
  auto exchange = [&](GroupWide group_wide) {
    const auto theirs = exchange_among(*group, values_of(me), pair, group_wide);
    EXPECT_FALSE(theirs[1 - partner_index].defined());
    EXPECT_TRUE(torch::equal(theirs[partner_index], values_of(partner)));
  };
  ASSERT_TRUE(group->measures_link());
  exchange(GroupWide::no);
  EXPECT_FALSE(group->measured_link().estimate());
  EXPECT_EQ(group->round_bytes_per_peer(2), 0);
  exchange(GroupWide::yes);
  ASSERT_TRUE(group->measured_link().estimate());
  const std::int64_t round_bytes = group->round_bytes_per_peer(2);
  EXPECT_GT(round_bytes, 0);
  EXPECT_TRUE(group->ranks_differing_from_rank_0(round_bytes).empty());
  exchange(GroupWide::yes);  // in the rounds learnt
}

// Run with 2 ranks: rank 1 never starts the all-reduce; rank 0 must get CommTimeout in time.
TEST(GlooFailures, StalledPeerTimesOut) {
  Group& group = world();
  if (group.rank() == 1) {
    std::this_thread::sleep_for(4s);
    return;
  }
  const auto start = Clock::now();
  auto tensor = torch::ones({16});
  EXPECT_THROW(group.all_reduce(tensor, ReduceOp::sum, 1s), CommTimeout);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.5);
}

// Run with 2 ranks: rank 1's process exits during the run; rank 0 must get PeerLost, not hang.
TEST(GlooFailures, LostPeerIsReported) {
  Group& group = world();
  group.barrier();
  if (group.rank() == 1) std::_Exit(0);  // the process dies without leaving the group
  const auto start = Clock::now();
  auto tensor = torch::ones({16});
  EXPECT_THROW(group.all_reduce(tensor, ReduceOp::sum, 30s), PeerLost);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 20.0);
}

// Run with 2 ranks: rank 1 sends a pipeline neighbour's message shorter than rank 0's stage expects (it runs
// another model; docs/pipeline.md "Bad input"). Gloo delivers a shorter message without a word; the size
// that ends every activation message makes it a CommError naming the stage. (A longer one makes Gloo 1.13
// abort the receiving process from its I/O thread: docs/security.md.)
TEST(GlooFailures, APipelineNeighboursShorterMessageIsRefused) {
  Group& group = world();
  pipeline::ActivationLink link(group, "fp32", 128);
  if (group.rank() == 1) {
    link.send(torch::ones({2, 3}), 0, pipeline::Message::activation);  // 6 values where 8 are expected
    link.wait_for_sends();
    return;
  }
  try {
    link.receive(torch::empty({2, 4}), 1, pipeline::Message::activation);
    FAIL() << "a short message was taken";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1 sent a message (hidden states) that is not the 32 bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loco::comm
