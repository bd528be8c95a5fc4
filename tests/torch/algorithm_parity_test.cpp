// loco's distributed strategies (src/loco/algo/) against plain-PyTorch simulations of the update rules
// in docs/algorithm-reference.md: tests/fixtures/algorithms_*.safetensors, written by
//
//     /usr/bin/python3 tests/reference/make_algo_fixtures.py
//
// (README "Algorithm fixtures"). Replicas run as threads (algorithm_harness.h), float64, tolerance
// 1e-10. Every comparison can fail: the fixture's results differ from the initial parameters and
// from wrong variants of each rule (flipped sign, no momentum, plain averaging, β/γ swapped, no
// mixing, …) by at least 3.9e-3 (the generator prints and asserts these margins), and some wrong
// settings are run through loco itself below and must not match.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <regex>

#include "loco/algo/pairing.h"
#include "torch/algorithm_harness.h"

namespace loco::test {
namespace {

constexpr double kTolerance = 1e-10;
// A wrong variant must be this far from the fixture (1e7 × the tolerance, and below every margin the
// generator reports).
constexpr double kFar = 1e-3;

// Losses of replica m for steps [0, steps) against "<prefix>loss/<m>/<k>".
void ExpectLosses(const AlgorithmFixture& f, const std::vector<ReplicaRun>& runs, std::int64_t steps,
                  const std::string& prefix = "") {
  for (std::size_t m = 0; m < runs.size(); ++m) {
    ASSERT_EQ(runs[m].losses.size(), static_cast<std::size_t>(steps));
    for (std::int64_t k = 0; k < steps; ++k) {
      EXPECT_NEAR(runs[m].losses[k], f.scalar(prefix + "loss/" + std::to_string(m) + "/" + std::to_string(k)),
                  kTolerance)
          << "replica " << m << " step " << k;
    }
  }
}

double Diff(const NamedTensors& actual, const NamedTensors& expected) { return max_abs_diff(expected, actual); }

// ---------------------------------------------------------------------------------------------
// Data parallel (docs/algorithm-reference.md §8)

void CheckDdp(RunConfig config, int micro_batches) {
  const auto f = load_algorithm_fixture("algorithms_ddp.safetensors");
  const auto runs = run_replicas(f, config, fixture_batches(f, 2), 2, micro_batches);
  for (int k = 0; k < 2; ++k) {
    // The large batch's loss is the mean of the replicas' losses (same number of positions each).
    EXPECT_NEAR((runs[0].losses[k] + runs[1].losses[k]) / 2, f.scalar("loss/" + std::to_string(k)), kTolerance);
  }
  for (std::size_t m = 0; m < runs.size(); ++m) {
    EXPECT_LT(Diff(runs[m].parameters, f.parameters("after")), kTolerance) << "replica " << m;
  }
}

// Two replicas averaging gradients every step = one model on their concatenated batch (params after
// 2 AdamW steps, losses). Margin: "after" is 0.036 from replica 0 trained alone (checked below).
TEST(AlgorithmParity, DdpTwoReplicasEqualLargeBatch) {
  const auto f = load_algorithm_fixture("algorithms_ddp.safetensors");
  CheckDdp(algorithm_config(f, "ddp", 2), 1);
}

// The same with small buckets (several all-reduces, launched from the gradient hooks) and with the
// overlap off (all buckets after backward).
TEST(AlgorithmParity, DdpBucketsAndNoOverlapEqualLargeBatch) {
  const auto f = load_algorithm_fixture("algorithms_ddp.safetensors");
  RunConfig small = algorithm_config(f, "ddp", 2);
  small.ddp.bucket_mb = 0.01;         // ~1,300 doubles: a few buckets for ~6,500 parameters
  small.ddp.first_bucket_mb = 0.002;  // ~260 doubles
  CheckDdp(small, 1);
  RunConfig no_overlap = small;
  no_overlap.ddp.overlap = false;
  CheckDdp(no_overlap, 1);
}

// Gradient accumulation: two 1-row micro-batches per step (the first without communication) give
// the same result as one 2-row batch.
TEST(AlgorithmParity, DdpWithAccumulationEqualsLargeBatch) {
  const auto f = load_algorithm_fixture("algorithms_ddp.safetensors");
  RunConfig config = algorithm_config(f, "ddp", 2);
  config.train.micro_batch_size = 1;
  CheckDdp(config, 2);
  config.ddp.bucket_mb = 0.01;
  config.ddp.first_bucket_mb = 0.002;
  CheckDdp(config, 2);
}

// Negative: without gradient averaging (replica 0 alone) the result is far from the fixture, so the
// DDP comparison above can fail.
TEST(AlgorithmParity, DdpFixtureIsFarFromOneReplicaAlone) {
  const auto f = load_algorithm_fixture("algorithms_ddp.safetensors");
  const auto alone = run_replicas(f, algorithm_config(f, "none", 1), fixture_batches(f, 1), 2);
  EXPECT_GT(Diff(alone[0].parameters, f.parameters("after")), kFar);
  EXPECT_GT(Diff(f.parameters("param"), f.parameters("after")), kFar);
}

// ---------------------------------------------------------------------------------------------
// DiLoCo and Local SGD (docs/algorithm-reference.md §1)

RunConfig DilocoConfig(const AlgorithmFixture& f) {
  RunConfig c = algorithm_config(f, "diloco", 2);
  const auto& h = f.hyperparameters.at("diloco");
  c.diloco.sync_every = h.at("sync_every");
  c.diloco.outer_lr = h.at("outer_lr");
  c.diloco.outer_momentum = h.at("outer_momentum");
  return c;
}

// One outer round (T = H = 3): losses, θ_g after round 0 (the evaluation parameters), and every
// replica restarting from θ_g. Margin: global/0 is 0.0084 from the plain average (localsgd/global).
TEST(AlgorithmParity, DilocoFirstRound) {
  const auto f = load_algorithm_fixture("algorithms_diloco.safetensors");
  const auto runs = run_replicas(f, DilocoConfig(f), fixture_batches(f, 2), 3);
  ExpectLosses(f, runs, 3);
  for (std::size_t m = 0; m < runs.size(); ++m) {
    EXPECT_LT(Diff(runs[m].evaluation, f.parameters("global/0")), kTolerance) << "replica " << m;
    EXPECT_LT(Diff(runs[m].parameters, f.parameters("global/0")), kTolerance) << "replica " << m;
  }
  EXPECT_GT(Diff(f.parameters("localsgd/global"), f.parameters("global/0")), kFar);
}

// Two outer rounds (T = 6): losses of all 6 inner steps (steps 3-5 start from θ_g), θ_g and the
// Nesterov buffer after round 1. Margins (generator): 0.028 from plain averaging, 0.13 from a flipped
// sign, 0.038 from no momentum.
TEST(AlgorithmParity, DilocoTwoRoundsWithMomentum) {
  const auto f = load_algorithm_fixture("algorithms_diloco.safetensors");
  const auto runs = run_replicas(f, DilocoConfig(f), fixture_batches(f, 2), 6);
  ExpectLosses(f, runs, 6);
  for (std::size_t m = 0; m < runs.size(); ++m) {
    EXPECT_LT(Diff(runs[m].evaluation, f.parameters("global/1")), kTolerance) << "replica " << m;
    const auto momentum = unflatten_whole_model(runs[m], state_tensor(runs[m], "outer/momentum"));
    EXPECT_LT(Diff(momentum, f.parameters("momentum/1")), kTolerance) << "replica " << m;
  }
  EXPECT_GT(Diff(f.parameters("global/0"), f.parameters("global/1")), kFar);
}

// Negative through loco: the same run without outer momentum does not match global/1.
TEST(AlgorithmParity, DilocoWithoutMomentumDoesNotMatch) {
  const auto f = load_algorithm_fixture("algorithms_diloco.safetensors");
  RunConfig c = DilocoConfig(f);
  c.diloco.outer_momentum = 0;
  const auto runs = run_replicas(f, c, fixture_batches(f, 2), 6);
  EXPECT_GT(Diff(runs[0].evaluation, f.parameters("global/1")), kFar);
}

// Local SGD (η = 1, μ = 0 built in): after one round θ_g is the plain average of the replicas.
// Margin: 0.025 from the initial parameters, 0.0084 from DiLoCo's global/0.
TEST(AlgorithmParity, LocalSgdAveragesReplicas) {
  const auto f = load_algorithm_fixture("algorithms_diloco.safetensors");
  RunConfig c = algorithm_config(f, "localsgd", 2);
  c.localsgd.sync_every = f.hyperparameters.at("localsgd").at("sync_every");
  c.localsgd.qsr_alpha = 0;
  const auto runs = run_replicas(f, c, fixture_batches(f, 2), 3);
  ExpectLosses(f, runs, 3);  // the first round's losses are DiLoCo's
  for (std::size_t m = 0; m < runs.size(); ++m) {
    EXPECT_LT(Diff(runs[m].evaluation, f.parameters("localsgd/global")), kTolerance) << "replica " << m;
    EXPECT_LT(Diff(runs[m].parameters, f.parameters("localsgd/global")), kTolerance) << "replica " << m;
  }
  EXPECT_GT(Diff(f.parameters("param"), f.parameters("localsgd/global")), kFar);
}

// ---------------------------------------------------------------------------------------------
// NoLoCo (docs/algorithm-reference.md §5)

RunConfig NolocoConfig(const AlgorithmFixture& f, int replicas) {
  RunConfig c = algorithm_config(f, "noloco", replicas);
  const auto& h = f.hyperparameters.at("noloco");
  c.noloco.sync_every = h.at("sync_every");
  c.noloco.momentum = h.at("momentum");
  c.noloco.beta = h.at("beta");
  c.noloco.gamma = h.at("gamma");
  return c;
}

// One group holding every replica (M = 2, and M = 3: the odd case's group of three): losses and φ
// after round 0 (T = 2) and round 1 (T = 4), the evaluation parameters and θ = φ on every replica.
// Margins (generator): 0.0039 from β and γ swapped, 0.0065 from no momentum.
void CheckNolocoOneGroup(int replicas) {
  const auto f = load_algorithm_fixture("algorithms_noloco.safetensors");
  const std::string prefix = "m" + std::to_string(replicas) + "/";
  for (int rounds = 1; rounds <= 2; ++rounds) {
    const auto runs = run_replicas(f, NolocoConfig(f, replicas), fixture_batches(f, replicas, prefix), 2 * rounds);
    ExpectLosses(f, runs, 2 * rounds, prefix);
    const auto phi = f.parameters(prefix + "phi/" + std::to_string(rounds - 1));
    for (std::size_t m = 0; m < runs.size(); ++m) {
      EXPECT_LT(Diff(runs[m].evaluation, phi), kTolerance) << "replica " << m << " round " << rounds - 1;
      EXPECT_LT(Diff(runs[m].parameters, phi), kTolerance) << "replica " << m << " round " << rounds - 1;
    }
    EXPECT_GT(Diff(f.parameters("param"), phi), kFar);
  }
}

TEST(AlgorithmParity, NolocoTwoReplicas) { CheckNolocoOneGroup(2); }
TEST(AlgorithmParity, NolocoThreeReplicasOneGroupOfThree) { CheckNolocoOneGroup(3); }

// A replica alone is a group of one (hand-computed): after its first round, φ₁ = φ₀ + β·(θ_T − φ₀) (the momentum
// starts at 0, and the γ term is 0 with φ its own mean), where θ_T is its model after the round's inner steps, as
// data parallel with one replica trains it; and θ = φ₁. Before, it skipped the step: φ, the model evaluated,
// stayed at the starting weights (a flipped sign or a skipped step is far from φ₁).
TEST(AlgorithmParity, NolocoAloneIsAGroupOfOne) {
  const auto f = load_algorithm_fixture("algorithms_noloco.safetensors");
  const std::vector<Batch> batches{fixture_batches(f, 2, "m2/").front()};
  const RunConfig config = NolocoConfig(f, 1);
  const auto alone = run_replicas(f, config, batches, config.noloco.sync_every);
  const auto trained = run_replicas(f, algorithm_config(f, "ddp", 1), batches, config.noloco.sync_every);
  const NamedTensors start = f.parameters("param");
  NamedTensors expected;
  for (const auto& [name, phi0] : start) {
    const auto theta = std::find_if(trained[0].parameters.begin(), trained[0].parameters.end(),
                                    [&](const auto& named) { return named.first == name; });
    ASSERT_NE(theta, trained[0].parameters.end()) << name;
    expected.emplace_back(name, phi0 + config.noloco.beta * (theta->second - phi0));
  }
  EXPECT_LT(Diff(alone[0].evaluation, expected), kTolerance);
  EXPECT_LT(Diff(alone[0].parameters, expected), kTolerance);
  EXPECT_GT(Diff(start, expected), kFar);
  EXPECT_GT(Diff(trained[0].parameters, expected), kFar);
}

// A train.seed for which loco pairs the four replicas as the fixture did at outer steps 0 and 1.
std::uint64_t SeedWithPairs(const nlohmann::json& groups) {
  auto sorted = [](std::vector<std::vector<int>> g) {
    std::sort(g.begin(), g.end());
    return g;
  };
  for (std::uint64_t seed = 0; seed < 10000; ++seed) {
    bool all = true;
    for (std::size_t s = 0; s < groups.size() && all; ++s) {
      all = sorted(replica_groups(seed, static_cast<std::int64_t>(s), 4)) ==
            sorted(groups[s].get<std::vector<std::vector<int>>>());
    }
    if (all) return seed;
  }
  ADD_FAILURE() << "no seed below 10000 gives the fixture's pairs";
  return 0;
}

RunConfig NolocoM4Config(const AlgorithmFixture& f) {
  RunConfig c = NolocoConfig(f, 4);
  c.train.seed = static_cast<std::int64_t>(SeedWithPairs(f.hyperparameters.at("noloco").at("groups")));
  return c;
}

// Four replicas in pairs that change between the two outer steps ({0,1},{2,3} then {0,2},{1,3}), so
// the pair members' φ differ at step 1 and the consensus term γ·(mean_G(φ) − φ_i) is exercised:
// losses, and each replica's own φ after round 1. Margins (generator): 0.0075 from γ = 0, 0.006
// from β and γ swapped, 0.016 from one group of four.
TEST(AlgorithmParity, NolocoFourReplicasInChangingPairs) {
  const auto f = load_algorithm_fixture("algorithms_noloco_m4.safetensors");
  const auto runs = run_replicas(f, NolocoM4Config(f), fixture_batches(f, 4), 4);
  ExpectLosses(f, runs, 4);
  for (std::size_t m = 0; m < runs.size(); ++m) {
    const auto phi = f.parameters("phi/1/" + std::to_string(m));
    EXPECT_LT(Diff(runs[m].evaluation, phi), kTolerance) << "replica " << m;
    EXPECT_LT(Diff(runs[m].parameters, phi), kTolerance) << "replica " << m;
  }
  EXPECT_GT(Diff(f.parameters("phi/1/0"), f.parameters("phi/1/2")), kFar);
}

// Negative through loco: β and γ swapped do not match (would pass unnoticed with one group only).
TEST(AlgorithmParity, NolocoWithBetaAndGammaSwappedDoesNotMatch) {
  const auto f = load_algorithm_fixture("algorithms_noloco_m4.safetensors");
  RunConfig c = NolocoM4Config(f);
  std::swap(c.noloco.beta, c.noloco.gamma);
  const auto runs = run_replicas(f, c, fixture_batches(f, 4), 4);
  double worst = 0;
  for (std::size_t m = 0; m < runs.size(); ++m) {
    worst = std::max(worst, Diff(runs[m].evaluation, f.parameters("phi/1/" + std::to_string(m))));
  }
  EXPECT_GT(worst, kFar);
}

// ---------------------------------------------------------------------------------------------
// Streaming DiLoCo (docs/algorithm-reference.md §4)

RunConfig StreamingConfig(const AlgorithmFixture& f) {
  RunConfig c = algorithm_config(f, "streaming", 2);
  const auto& h = f.hyperparameters.at("streaming");
  c.streaming.sync_every = h.at("sync_every");
  c.streaming.fragments = h.at("fragments");
  c.streaming.assignment = h.at("assignment");
  c.streaming.embeddings_fragment = false;
  c.streaming.overlap = h.at("overlap");
  c.streaming.mix = h.at("mix");
  c.streaming.outer_lr = h.at("outer_lr");
  c.streaming.outer_momentum = h.at("outer_momentum");
  c.streaming.codec = "fp32";
  return c;
}

// P = 2 strided fragments, H = 4, τ = 1, α = 0.5, T = 7: fragment 1 sends at 2 and 6, fragment 0 at 4,
// each applied (mixed) one step later, then the final blocking sync of both at 7. Losses of all 7
// steps, θ_g, and each replica's θ_m. Margins (generator): 0.010 from no mixing, 0.014 from τ = 0,
// 0.014 from swapped fragment offsets, 0.0084 from one fragment.
TEST(AlgorithmParity, StreamingTwoFragmentsWithOverlap) {
  const auto f = load_algorithm_fixture("algorithms_streaming.safetensors");
  const auto runs = run_replicas(f, StreamingConfig(f), fixture_batches(f, 2), 7);
  ExpectLosses(f, runs, 7);
  for (std::size_t m = 0; m < runs.size(); ++m) {
    EXPECT_LT(Diff(runs[m].evaluation, f.parameters("global")), kTolerance) << "replica " << m;
    EXPECT_LT(Diff(runs[m].parameters, f.parameters("replica/" + std::to_string(m))), kTolerance) << "replica " << m;
  }
  EXPECT_GT(Diff(f.parameters("param"), f.parameters("global")), kFar);
}

// Negative through loco: without mixing (α = 0) the result does not match.
TEST(AlgorithmParity, StreamingWithoutMixingDoesNotMatch) {
  const auto f = load_algorithm_fixture("algorithms_streaming.safetensors");
  RunConfig c = StreamingConfig(f);
  c.streaming.mix = 0;
  const auto runs = run_replicas(f, c, fixture_batches(f, 2), 7);
  EXPECT_GT(Diff(runs[0].evaluation, f.parameters("global")), kFar);
}

// τ = 0, P = 1 is DiLoCo (H = 3, η = 0.7, μ = 0.9, T = 6): losses and θ_g, which the generator
// checked against algorithms_diloco's global/1 (checked here too).
TEST(AlgorithmParity, StreamingWithoutOverlapOneFragmentIsDiloco) {
  const auto f = load_algorithm_fixture("algorithms_streaming.safetensors");
  RunConfig c = StreamingConfig(f);
  const auto& h = f.hyperparameters.at("tau0");
  c.streaming.fragments = h.at("fragments");
  c.streaming.sync_every = h.at("sync_every");
  c.streaming.overlap = h.at("overlap");
  c.streaming.outer_lr = h.at("outer_lr");
  c.streaming.outer_momentum = h.at("outer_momentum");
  const auto runs = run_replicas(f, c, fixture_batches(f, 2), h.at("steps").get<std::int64_t>());
  ExpectLosses(f, runs, 6, "tau0/");
  for (std::size_t m = 0; m < runs.size(); ++m) {
    EXPECT_LT(Diff(runs[m].evaluation, f.parameters("tau0/global")), kTolerance) << "replica " << m;
    EXPECT_LT(Diff(runs[m].parameters, f.parameters("tau0/global")), kTolerance) << "replica " << m;
  }
  const auto diloco = load_algorithm_fixture("algorithms_diloco.safetensors");
  EXPECT_LT(Diff(f.parameters("tau0/global"), diloco.parameters("global/1")), kTolerance);
}

// comm_s counts what training waited, not the exchanges it overlapped (comm::BackgroundWaits). The
// fixture's schedule behind 50 ms of emulated latency, each step 300 ms of "compute": the exchanges sent
// at steps 2, 4 and 6 (each two phases of one round, 100 ms) finish during the next step's compute; the
// final synchronisation at 7 sends both fragments and waits for each (200 ms). The background thread
// waits through all five (up to 500 ms: a wait entered late, after a transfer ended, is shorter), training
// through the last two only. Before, comm_s was the background's five.
TEST(AlgorithmParity, StreamingCountsOnlyTheWaitsOfTraining) {
  const auto f = load_algorithm_fixture("algorithms_streaming.safetensors");
  comm::GroupOptions slow;
  slow.link = comm::LinkModel::parse("", "50", 2);
  slow.delay = comm::LinkDelay::latency;
  const auto runs = run_replicas(f, StreamingConfig(f), fixture_batches(f, 2), 7, 1, slow, std::chrono::milliseconds(300));
  ExpectLosses(f, runs, 7);  // the values do not depend on the timing
  for (const auto& run : runs) {
    EXPECT_GT(run.comm.background_s, 0.3);
    EXPECT_GE(run.comm.blocked_s, 2 * 0.1 - 0.01);
    EXPECT_LT(run.comm.blocked_s, 2 * 0.1 + 0.15);
  }
}

// Note "overlap-auto", first exchanges: replicas that measure wall time (as processes do) behind a link of
// 150 ms latency whose bandwidth makes the bytes take nothing, each step ≥ 200 ms of "compute", H = 8 and 2
// fragments. Fragment 1 sends first (step 4) with nothing measured, so its τ comes from the configured
// link: 1.4 times the ring's 2 rounds, 0.42 s, hidden by ⌈1.1 · 0.42 / s⌉ = 2 or 3 steps (s 0.2–0.46 s),
// not 1. Applied by step 7, its measured exchange predicts fragment 0's at its first send (step 8).
TEST(AlgorithmParity, StreamingPredictsTheOverlapOfFirstExchanges) {
  const auto f = load_algorithm_fixture("algorithms_streaming.safetensors");
  RunConfig c = StreamingConfig(f);
  c.streaming.sync_every = 8;
  c.streaming.fragments = 2;
  c.streaming.overlap = 1;
  c.streaming.overlap_auto = true;
  c.dist.backend = "gloo";  // make_strategy: τ auto on the wall clock, not the emulated one
  comm::GroupOptions slow;
  slow.link = comm::LinkModel::parse("100000", "150", 2);
  slow.delay = comm::LinkDelay::latency;
  testing::internal::CaptureStderr();
  run_replicas(f, c, fixture_batches(f, 2), 12, 1, slow, std::chrono::milliseconds(200));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::regex_search(
      log, std::regex(R"(fragment 1 [^:]*: tau 1 -> [23] \(predicted exchange 0\.420 s from the configured link, )")))
      << log;
  EXPECT_TRUE(std::regex_search(
      log, std::regex(R"(fragment 0 [^:]*: tau 1 -> [2-7] \(predicted exchange [0-9.]+ s from fragment 1 [^)]*\)'s exchange, )")))
      << log;
}

}  // namespace
}  // namespace loco::test
