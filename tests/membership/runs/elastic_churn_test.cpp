// Elastic runs under churn played by a schedule (dist.churn, the fixture: elastic_run.h): replicas as
// threads of one process, or ranks of `loco launch --elastic`, leave, return and stall, and every committed
// synchronisation is kept, for DiLoCo, Streaming DiLoCo (with and without overlap), SparseLoCo, data parallel
// and NoLoCo; a replica that sends NaN is left out of every median and removed after three rejections.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "membership/runs/elastic_run.h"

namespace loco {

namespace fs = std::filesystem;

// dist.backend = "local" with dist.churn: three replicas as threads of one process, each a member of a
// coordinator the process serves. Replica 2 leaves at step 10 and returns (as a new member, healing) when
// the run reaches step 30; replica 1 stalls at step 60 (no heartbeats) until the others reach step 80,
// which they do only once its heartbeat has expired (the local coordinator's join window is 30 s); it
// rejoins by itself and heals. (A stall of 2 s let the others finish first on a fast machine: it then
// trained alone and healed from nobody.) No committed outer step is lost and the three end with bit-identical globals
// (`tensors`: the names of the global parameters in a checkpoint).
void ElasticTrain::simulated_churn(const std::string& run, const Checks& checks, int synchronisations) {
  constexpr int kSteps = 400;
  std::vector<std::string> args = {LOCO_BINARY, "train",
                                   "--config",  config().string(),
                                   "--set",     "dist.backend=local",
                                   "--set",     "dist.churn=2@10:leave, 2@30:return, 1@60:stall-until=80",
                                   "--set",     "train.out_dir=" + (*dir_ / run).string(),
                                   "--set",     "train.steps=" + std::to_string(kSteps)};
  for (const auto& setting : checks.settings) {
    args.push_back("--set");
    args.push_back(setting);
  }
  test::ChildProcess train(args);
  EXPECT_EQ(train.wait(300), 0) << train.output();
  const std::string out = train.output();
  for (const std::string expected :
       {"churn: replica 2 leaves after step 10", "churn: replica 2 returns at step 3",
        "churn: replica 1 stalls after step 60 until a replica reaches step 80 (no heartbeats)",
        "rejoined as replica-1#2", "2 members (replica-0#1, replica-1#1)"}) {
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  }
  EXPECT_EQ(events(run, "replica-2-2", "heal").size(), 1u);
  EXPECT_EQ(events(run, "replica-1-1", "heal").size(), 1u);
  nlohmann::json last;
  events(run, "replica-0-1", "quorum", &last);
  EXPECT_EQ(last.at(checks.counter), synchronisations) << last;  // every synchronisation committed
  for (const std::string& tensor : checks.tensors) {
    const std::string g0 = final_global(run, "replica-0-1", kSteps, tensor);
    EXPECT_FALSE(g0.empty()) << tensor;
    EXPECT_TRUE(g0 == final_global(run, "replica-1-1", kSteps, tensor)) << "replicas 0 and 1 differ in " << tensor;
    EXPECT_TRUE(g0 == final_global(run, "replica-2-2", kSteps, tensor))
        << "replica 0 and the returned replica 2 differ in " << tensor;
  }
}

TEST_F(ElasticTrain, SimulatedChurnInOneProcess) { simulated_churn("churn", Checks{}, 400 / 4); }

// Streaming DiLoCo without overlap: two fragments in turn (H = 4: one synchronises every 2 steps), each
// outer step committed in two phases like DiLoCo's.
TEST_F(ElasticTrain, StreamingDilocoUnderSimulatedChurn) {
  simulated_churn(
      "streaming",
      {{"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2", "streaming.overlap=0"},
       "outer_steps",
       {"outer/0/global", "outer/1/global"}},
      400 / 2);
}

// Streaming DiLoCo with overlap (τ = 1, note "elastic-overlap"): each fragment's exchange runs while the
// next inner step does. The leave at step 10 and the stall at step 60 each break a quorum while its exchange
// is in flight; the outer step is retried one step later with the kept pseudo-gradients and commits.
TEST_F(ElasticTrain, StreamingDilocoWithOverlapUnderSimulatedChurn) {
  simulated_churn(
      "streaming-overlap",
      {{"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2", "streaming.overlap=1"},
       "outer_steps",
       {"outer/0/global", "outer/1/global"}},
      400 / 2);
}

// The same, with c killed at its first exchange while a and b already exchange in the background: they
// learn of it when the outer step is due (one step later), retry it in a quorum of two and lose none.
TEST_F(ElasticTrain, StreamingWithOverlapSurvivorsFinishAfterAMemberIsKilledInsideTheExchange) {
  survivors_finish(
      "streaming-overlap-exchange", "exchanging:KILL",
      {{"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2", "streaming.overlap=1"},
       "outer_steps",
       {"outer/0/global", "outer/1/global"}},
      24 / 2);
  EXPECT_FALSE(events("streaming-overlap-exchange", "a-1", "abort").empty());
}

// The exchange begun at the last synchronisation point before the end (step 22 of 23) is in flight when c
// is killed after it: a and b learn of it at the last step, where that exchange lands before the last
// synchronisation; they retry it without c, then still synchronise every fragment at step 23 (11 points and
// the last step).
TEST_F(ElasticTrain, StreamingWithOverlapRetriesAnExchangeThatFailsAtTheLastStep) {
  const Checks streaming = {
      {"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2", "streaming.overlap=1"},
      "outer_steps",
      {"outer/0/global", "outer/1/global"}};
  survivors_finish("streaming-overlap-last", "22:KILL", streaming, 22 / 2 + 1, 23);
  EXPECT_FALSE(events("streaming-overlap-last", "a-1", "abort").empty());
}

// With one member, elastic Streaming DiLoCo with overlap is Streaming DiLoCo (algo/diloco.h, tested
// against the Python reference): the same global parameters and model to the last bit, here with τ = 2 of a
// spacing of 4 and α = 0.25 (a mix the wrong way round, or an outer step applied a step early or late, would
// change both), and an exchange that starts 2 steps before the end. Resumed from its checkpoint at step 20,
// taken while an exchange was in flight, the elastic run still ends the same (note "elastic-resume").
TEST_F(ElasticTrain, StreamingWithOverlapOnOneMemberIsStreamingDiloco) {
  const auto final_files = [&](const std::string& run, bool elastic, const std::string& resume = "") {
    std::vector<std::string> args = {LOCO_BINARY, "train",
                                     "--config",  config().string(),
                                     "--set",     "dist.backend=local",
                                     "--set",     "dist.replicas=1",
                                     "--set",     "dist.algorithm=streaming",
                                     "--set",     "streaming.sync_every=8",
                                     "--set",     "streaming.fragments=2",
                                     "--set",     "streaming.overlap=2",
                                     "--set",     "streaming.mix=0.25",
                                     "--set",     std::string("dist.elastic=") + (elastic ? "true" : "false"),
                                     "--set",     "train.steps=42",
                                     "--set",     "train.checkpoint_every=20",
                                     "--set",     "train.out_dir=" + (*dir_ / run).string()};
    if (!resume.empty()) args.insert(args.end(), {"--resume", resume});
    test::ChildProcess train(args);
    EXPECT_EQ(train.wait(120), 0) << train.output();
    const fs::path checkpoint = elastic ? *dir_ / run / "members" / "replica-0-1" / "checkpoints" / "step_42"
                                        : *dir_ / run / "checkpoints" / "step_42";
    std::string files;
    for (const char* name : {"strategy.safetensors", "model.safetensors"}) files += test::read_text(checkpoint / name);
    return files;
  };
  const std::string streaming = final_files("overlap-plain", false);
  EXPECT_GT(streaming.size(), 1000u);
  EXPECT_TRUE(streaming == final_files("overlap-elastic", true)) << "elastic streaming differs from streaming";
  const fs::path in_flight = *dir_ / "overlap-elastic" / "members" / "replica-0-1" / "checkpoints" / "step_20";
  EXPECT_TRUE(streaming == final_files("overlap-resumed", true, in_flight.string()))
      << "elastic streaming resumed at step 20 differs from streaming";
}

// A replica that sends NaN from step 8 on (dist.adversary) is left out of every median and reported with
// the votes; after its third rejected synchronisation the coordinator removes it and bars its name, and the
// two others finish with every outer step committed and bit-identical global parameters.
void ElasticTrain::removes_a_replica_sending_nan(const std::string& run, const std::vector<std::string>& settings,
                                                 const std::string& refusal) {
  constexpr int kSteps = 60;
  std::vector<std::string> args = {LOCO_BINARY, "train",
                                   "--config",  config().string(),
                                   "--set",     "dist.backend=local",
                                   "--set",     "dist.adversary=2@8:nan",
                                   "--set",     "train.steps=" + std::to_string(kSteps),
                                   "--set",     "train.out_dir=" + (*dir_ / run).string()};
  for (const std::string& setting : settings) args.insert(args.end(), {"--set", setting});
  test::ChildProcess train(args);
  EXPECT_EQ(train.wait(300), 0) << train.output();
  const std::string out = train.output();
  EXPECT_NE(out.find(refusal), std::string::npos) << out;
  EXPECT_NE(out.find("replica 2 was removed from the run: member name 'replica-2' was removed from this run: its "
                     "pseudo-gradients held NaN or Inf in 3 synchronisations"),
            std::string::npos)
      << out;
  nlohmann::json last;
  events(run, "replica-0-1", "quorum", &last);
  EXPECT_EQ(last.at("outer_steps"), kSteps / 4) << last;
  const std::string g0 = final_global(run, "replica-0-1", kSteps);
  EXPECT_FALSE(g0.empty());
  EXPECT_TRUE(g0 == final_global(run, "replica-1-1", kSteps)) << "replicas 0 and 1 differ";
  for (std::size_t i = 0; i + 4 <= g0.size(); i += 4) {  // no NaN reached the global parameters (float32)
    float value = 0;
    std::memcpy(&value, g0.data() + i, 4);
    ASSERT_TRUE(std::isfinite(value)) << "value " << i / 4;
  }
}

TEST_F(ElasticTrain, AReplicaSendingNaNIsRemovedAfterThreeRejections) {
  removes_a_replica_sending_nan("nan", {"dist.aggregation=median"},
                                "the pseudo-gradient of replica(s) 2 held NaN or Inf; left out of the median");
}

// SparseLoCo: the NaN goes into the replica's accumulator and out in its contribution, which every member
// refuses (as a contribution that does not decode) and reports with its vote, as the dense rules do.
TEST_F(ElasticTrain, ASparselocoReplicaSendingNaNIsRemovedAfterThreeRejections) {
  removes_a_replica_sending_nan("sparse-nan", {"dist.algorithm=sparseloco", "sparseloco.sync_every=4"},
                                "the sparse contribution of replica(s) 2 did not decode");
}

// SparseLoCo: the accumulators are each member's own; a returning or stalled member heals (and restarts its
// accumulator at 0), every outer step commits, and the three end with bit-identical global parameters.
TEST_F(ElasticTrain, SparselocoUnderSimulatedChurn) {
  simulated_churn(
      "sparseloco-churn",
      {{"dist.algorithm=sparseloco", "sparseloco.sync_every=4", "sparseloco.topk=8"}, "outer_steps", {"outer/global"}},
      400 / 4);
}

// Data parallel: every step committed, and the three end with bit-identical models (a returning replica
// heals before its first gradient counts; the stalled one heals in the middle of a step).
TEST_F(ElasticTrain, DataParallelUnderSimulatedChurn) { simulated_churn("ddp-churn", data_parallel(), 400); }

// Without faults, elastic data parallel is data parallel: three replica threads reach the same validation
// loss as `ddp` over the same windows (a wrong weight, mean or data layout would move it: weighting the
// replicas 1, 2, 3 instead of equally moved it by 3e-4 in a trial).
TEST_F(ElasticTrain, DataParallelWithoutFaultsMatchesDdp) {
  const auto final_eval_loss = [&](const std::string& run, bool elastic) {
    test::ChildProcess train({LOCO_BINARY, "train", "--config", config().string(), "--set", "dist.backend=local",
                              "--set", "dist.algorithm=ddp", "--set",
                              std::string("dist.elastic=") + (elastic ? "true" : "false"), "--set", "train.steps=30",
                              "--set", "train.eval_batches=2", "--set", "train.out_dir=" + (*dir_ / run).string()});
    EXPECT_EQ(train.wait(120), 0) << train.output();
    std::ifstream in(elastic ? *dir_ / run / "members" / "replica-0-1" / "metrics.jsonl"
                             : *dir_ / run / "metrics.jsonl");
    nlohmann::json last;
    for (std::string line; std::getline(in, line);) last = nlohmann::json::parse(line);
    return last.value("eval_loss", -1.0);
  };
  const double ddp = final_eval_loss("ddp-plain", false), elastic = final_eval_loss("ddp-elastic", true);
  EXPECT_GT(ddp, 0);
  EXPECT_NEAR(elastic, ddp, 1e-5);
}

// NoLoCo: replica 0 averages in every round (in a three, or a pair while a replica is gone or heals); the
// returning and the stalled replica heal from an up-to-date one and go on with their own states.
TEST_F(ElasticTrain, NolocoUnderSimulatedChurn) { simulated_churn("noloco-churn", noloco(), 400 / 4); }

// The ranks of `loco launch --elastic` play a dist.churn schedule as the threads do: rank 2 kills itself
// after step 10 (kill -9; the launcher reports it and starts it again), its second process waits for the
// run to reach step 30 and joins as a new member, which heals; rank 1 stalls after step 60 until the
// others reach step 80, which they do only once its heartbeat has expired (the join window is longer than
// the heartbeat timeout); it rejoins by itself and heals. Bit-identical globals at the end, every outer
// step committed.
TEST_F(ElasticTrain, LaunchPlaysAChurnScheduleOnItsRanks) {
  constexpr int kSteps = 400;
  test::ChildProcess launch({LOCO_BINARY,
                             "launch",
                             "--elastic",
                             "--nproc",
                             "3",
                             "--max-restarts",
                             "1",
                             "--heartbeat-timeout-s",
                             "1",
                             "--join-window-s",
                             "30",
                             "--",
                             "train",
                             "--config",
                             config().string(),
                             "--set",
                             "train.out_dir=" + (*dir_ / "launch-churn").string(),
                             "--set",
                             "train.steps=" + std::to_string(kSteps),
                             "--set",
                             "comm.timeout_s=60",
                             "--set",
                             "dist.churn=2@10:leave, 2@30:return, 1@60:stall-until=80"});
  EXPECT_EQ(launch.wait(300), 0) << launch.output();
  const std::string out = launch.output();
  for (const std::string expected :
       {"[rank 2] churn: replica 2 leaves after step 10", "rank 2 was killed by SIGKILL; starting it again",
        "[rank 2] churn: replica 2 returns at step 30 as a new member",
        "[rank 1] churn: replica 1 stalls after step 60 until a replica reaches step 80 (no heartbeats)",
        "rejoined as rank-1#2"}) {
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  }
  EXPECT_EQ(events("launch-churn", "rank-2-2", "heal").size(), 1u);
  EXPECT_EQ(events("launch-churn", "rank-1-1", "heal").size(), 1u);
  nlohmann::json last;
  events("launch-churn", "rank-0-1", "quorum", &last);
  EXPECT_EQ(last.at("outer_steps"), kSteps / 4) << last;
  const std::string g0 = final_global("launch-churn", "rank-0-1", kSteps);
  EXPECT_FALSE(g0.empty());
  EXPECT_TRUE(g0 == final_global("launch-churn", "rank-1-1", kSteps)) << "ranks 0 and 1 differ";
  EXPECT_TRUE(g0 == final_global("launch-churn", "rank-2-2", kSteps)) << "rank 0 and the returned rank 2 differ";
}

}  // namespace loco
