// Elastic pipeline replicas (docs/pipeline.md "Churn"; the fixture: elastic_run.h): a killed stage stops only
// its replica, which heals stage by stage from its twin and rejoins; replicas that all died resume from their
// checkpoints; stages that presume a commit and stages that retry settle together; a coordinator restart
// breaks no replica.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "membership/runs/elastic_run.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

// Pipeline replicas (docs/pipeline.md "Churn"): `loco launch --elastic --nproc 2*S` runs two replicas of S
// stages. Killing rank `killed` (stage killed mod S of replica killed / S) after step 10 stops that replica
// alone: its other stages fail, the launcher starts all of them again, each heals from the same stage of
// the live replica and the replica rejoins. The live replica commits every outer step; at the end every
// stage is bit-identical to its twin.
class ElasticPipelines : public ElasticTrain {
 protected:
  // `checks`: the algorithm, its counter of synchronisations (`synchronisations` of them at the end, none
  // lost; nullopt: some) and the tensors twin stages must hold alike.
  void replica_heals(const std::string& run, int stages, int killed, const Checks& checks = Checks{},
                     std::optional<int> synchronisations = 400 / 4) {
    constexpr int kSteps = 400;
    const int survivor = killed < stages ? 1 : 0;  // the live replica
    std::vector<std::string> settings = {"dist.stages=" + std::to_string(stages), "dist.replicas=2",
                                         "model.num_hidden_layers=" + std::to_string(stages),
                                         "train.micro_batch_size=1"};
    settings.insert(settings.end(), checks.settings.begin(), checks.settings.end());
    const std::string out =
        launched(run, 2 * stages, 2 * stages, "rank-" + std::to_string(killed) + "@10:KILL", kSteps, settings);
    EXPECT_NE(out.find("rank " + std::to_string(killed) + " was killed by SIGKILL; starting it again"),
              std::string::npos)
        << out;
    const int broken = killed / stages;
    for (int stage = 0; stage < stages; ++stage) {
      const int rank = broken * stages + stage, twin = survivor * stages + stage;
      if (rank != killed) {  // its neighbour went: it stops, and starts again
        EXPECT_NE(out.find("[rank " + std::to_string(rank) + "] loco: error: member rank-" + std::to_string(rank) +
                           "#1 (stage " + std::to_string(stage) + " of pipeline replica replica-" +
                           std::to_string(broken) + ") stops"),
                  std::string::npos)
            << out;
      }
      EXPECT_TRUE(std::regex_search(out, std::regex("\\[rank " + std::to_string(rank) +
                                                    "\\] elastic: healed from rank-" + std::to_string(twin) + "#1")))
          << "stage " << stage << " heals from its twin\n"
          << out;
    }
    // The directories: a replica's is its first stage's member's; stage s > 0 in its stage_s.
    const std::string live = "rank-" + std::to_string(survivor * stages) + "-1";
    std::string restarted;
    for (const auto& entry : fs::directory_iterator(*dir_ / run / "members")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("rank-" + std::to_string(broken * stages) + "-", 0) == 0 &&
          fs::exists(entry.path() / "checkpoints" / ("step_" + std::to_string(kSteps)))) {
        restarted = name;
      }
    }
    ASSERT_FALSE(restarted.empty()) << "the restarted replica wrote no final checkpoint\n" << out;
    nlohmann::json last;
    events(run, live, "quorum", &last);
    if (synchronisations) {
      EXPECT_EQ(last.at(checks.counter), *synchronisations) << last;  // none lost
    } else {
      EXPECT_GT(last.at(checks.counter), 0) << last;
    }
    EXPECT_EQ(events(run, restarted, "heal").size(), 1u);
    for (const std::string& tensor : checks.tensors) {
      for (int stage = 0; stage < stages; ++stage) {
        const std::string part = stage == 0 ? "" : "/stage_" + std::to_string(stage);
        const std::string mine = final_global(run, restarted + part, kSteps, tensor);
        EXPECT_FALSE(mine.empty());
        EXPECT_TRUE(mine == final_global(run, live + part, kSteps, tensor))
            << "stage " << stage << " differs from its twin";
      }
    }
  }
};

TEST_F(ElasticPipelines, AKilledLastStageStopsOnlyItsReplicaWhichHealsAndRejoins) {
  replica_heals("pipeline-end", 2, /*killed=*/1);
}

TEST_F(ElasticPipelines, AKilledMiddleStageStopsOnlyItsReplicaWhichHealsAndRejoins) {
  replica_heals("pipeline-middle", 3, /*killed=*/4);
}

// Elastic data parallel (a quorum and a vote every step: twin stages hold the same model) and NoLoCo (no
// vote; replicas that differ by design, and a replica alone has nobody to average with, so its rounds
// are not all counted) on pipeline replicas, the last stage of replica 0 killed.
TEST_F(ElasticPipelines, DataParallelReplicasHealAndRejoin) {
  replica_heals("pipeline-ddp", 2, /*killed=*/1, data_parallel(), 400);
}

TEST_F(ElasticPipelines, NolocoReplicasHealAndRejoin) {
  replica_heals("pipeline-noloco", 2, /*killed=*/1, noloco(), std::nullopt);
}

// Note "resume-earlier-life" for pipeline replicas: every rank of 2 replicas × 2 stages dies after step 20
// (checkpoints every 8 steps). Each stage started again resumes from the step-16 checkpoint its replica's first
// stage's earlier process wrote (stage 1 its part in stage_1/), and the run goes on to its end: no outer step
// lost or counted twice, twin stages alike. (Before, the stages started from nothing, and the coordinator, which
// had seen step 20, formed no quorum for them: the run failed after comm.timeout_s.)
TEST_F(ElasticPipelines, LaunchResumesPipelineReplicasThatAllDiedFromTheirCheckpoints) {
  constexpr int kSteps = 48;
  const std::string out =
      launched("pipeline-all-died", 4, 4, "20:KILL", kSteps,
               {"train.checkpoint_every=8", "dist.stages=2", "dist.replicas=2", "train.micro_batch_size=1"});
  for (int rank = 0; rank < 4; ++rank) {
    const std::string first_stage = "rank-" + std::to_string(rank / 2 * 2);
    EXPECT_NE(
        out.find("[rank " + std::to_string(rank) + "] loco train: member rank-" + std::to_string(rank) +
                 " (process 2 of its rank) resumes from " +
                 (*dir_ / "pipeline-all-died" / "members" / (first_stage + "-1") / "checkpoints" / "step_16").string()),
        std::string::npos)
        << out;
  }
  // As for whole replicas, a replica that came back only as the other finished heals to the last step and
  // writes no checkpoint of its own.
  std::vector<std::string> finished;
  for (const std::string replica_dir : {"rank-0-2", "rank-2-2"}) {
    if (final_global("pipeline-all-died", replica_dir, kSteps).empty()) continue;
    finished.push_back(replica_dir);
    nlohmann::json last;
    events("pipeline-all-died", replica_dir, "quorum", &last);
    EXPECT_EQ(last.at("outer_steps"), kSteps / 4) << replica_dir << ": " << last;
  }
  ASSERT_FALSE(finished.empty()) << out;
  for (const std::string part : {"", "/stage_1"}) {
    const std::string global = final_global("pipeline-all-died", finished.front() + part, kSteps);
    EXPECT_FALSE(global.empty()) << part;
    EXPECT_TRUE(global == final_global("pipeline-all-died", finished.back() + part, kSteps)) << part << " differs";
  }
}

// Note "stage-agreement": replica 1's last stage (rank 3) is killed inside its first outer exchange, and the
// coordinator dies as it decides the abort that follows, before anyone read it. In replica 0, stage 1's
// exchange (with rank 3) failed, so it retries; stage 0's (with rank 2) went well, so it presumes a commit
// once a replacement coordinator refuses its vote. The two settle together: stage 0 applies nothing, both
// retry under the replacement, and replica 0 finishes the run alone. (Before, stage 0 applied the step and
// trained on while stage 1 waited for a quorum without it: both failed after comm.timeout_s.)
TEST_F(ElasticPipelines, StagesThatPresumeAndStagesThatRetrySettleTogether) {
  auto first = coordinator("pipeline-split", 2, 0, 0, /*min_replicas=*/1, "abort:KILL");
  const std::string address = address_;
  const int port = std::stoi(address.substr(address.rfind(':') + 1)), store_port = store_port_;
  constexpr int kSteps = 40;
  const std::vector<std::string> stages = {"dist.stages=2", "dist.replicas=2", "train.micro_batch_size=1"};
  std::vector<std::unique_ptr<test::ChildProcess>> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    ranks.push_back(
        member("pipeline-split", "rank-" + std::to_string(rank), kSteps, rank == 3 ? "exchanging:KILL" : "", stages));
  }
  EXPECT_EQ(ranks[3]->wait(120), 128 + SIGKILL) << ranks[3]->output();
  ASSERT_EQ(first->wait(60), 128 + SIGKILL) << first->output();
  EXPECT_NE(first->output().find("loco coordinator: abort q1 step 4"), std::string::npos) << first->output();
  const auto second = coordinator("pipeline-split", 1, port, store_port, /*min_replicas=*/1);
  ASSERT_EQ(address_, address) << second->output();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(ranks[rank]->wait(180), 0) << ranks[rank]->output();
    EXPECT_EQ(ranks[rank]->output().find(") stops:"), std::string::npos) << ranks[rank]->output();
  }
  const std::string presumed = ranks[0]->output();
  EXPECT_NE(presumed.find("presumed committed"), std::string::npos) << presumed;
  EXPECT_NE(presumed.find("aborted (stage(s) 1 of this pipeline replica did not commit it; its stages retry together)"),
            std::string::npos)
      << presumed;
  EXPECT_NE(ranks[1]->output().find("elastic: synchronisation at step 4 failed"), std::string::npos)
      << ranks[1]->output();
  EXPECT_NE(ranks[2]->wait(120), 0) << ranks[2]->output();  // its replica lost its last stage
  // Replica 0 committed every outer step, the retried one once.
  nlohmann::json last;
  events("pipeline-split", "rank-0-1", "quorum", &last);
  EXPECT_EQ(last.at("outer_steps"), kSteps / 4) << last;
  for (const std::string part : {"", "/stage_1"}) {
    EXPECT_FALSE(final_global("pipeline-split", "rank-0-1" + part, kSteps).empty()) << part;
  }
}

// A replacement coordinator breaks no pipeline replica: every stage rejoins it (a new incarnation), the
// pipelines' own groups stay, and the run finishes with twin stages bit-identical.
TEST_F(ElasticPipelines, TheReplicasSurviveARestartOfTheirCoordinator) {
  auto first = coordinator("pipeline-restart", 2);
  const std::string address = address_;
  const int port = std::stoi(address.substr(address.rfind(':') + 1)), store_port = store_port_;
  constexpr int kSteps = 400;
  const std::vector<std::string> stages = {"dist.stages=2", "dist.replicas=2", "train.micro_batch_size=1"};
  std::vector<std::unique_ptr<test::ChildProcess>> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    ranks.push_back(member("pipeline-restart", "rank-" + std::to_string(rank), kSteps, "", stages));
  }
  ASSERT_TRUE(ranks[0]->wait_for(std::regex("step 20/400"), 120)) << ranks[0]->output();
  first->signal(SIGKILL);
  EXPECT_EQ(first->wait(10), 128 + SIGKILL);
  const auto second = coordinator("pipeline-restart", 2, port, store_port);
  ASSERT_EQ(address_, address) << second->output();
  for (auto& rank : ranks) EXPECT_EQ(rank->wait(300), 0) << rank->output();
  for (auto& rank : ranks) {
    EXPECT_TRUE(std::regex_search(rank->output(), std::regex("rejoined as rank-[0-3]#1"))) << rank->output();
  }
  for (const std::string part : {"", "/stage_1"}) {
    const std::string mine = final_global("pipeline-restart", "rank-0-1" + part, kSteps);
    EXPECT_FALSE(mine.empty()) << part;
    EXPECT_TRUE(mine == final_global("pipeline-restart", "rank-2-1" + part, kSteps)) << "twins differ: " << part;
  }
}

}  // namespace
}  // namespace loco
