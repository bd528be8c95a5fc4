// Pipeline replicas as the coordinator's units (coordinator.h note "pipeline-units"): the rules count a replica
// once every stage has a member, every stage of a quorum gets the same ranks and a group of its own, an outer
// step commits for all stages or none with hashes compared within a stage, and a stage that goes takes its
// replica's other members with it.
#include <gtest/gtest.h>

#include "loco/membership/commit_rules.h"
#include "loco/membership/coordinator.h"
#include "loco/membership/membership_error.h"
#include "loco/membership/quorum_rules.h"
#include "loco/membership/wire.h"
#include "membership/rules/expect_refusal.h"

namespace loco::membership {
namespace {

using Ids = std::vector<std::string>;

StageMember part(const std::string& unit, int stage, double heartbeat, std::optional<double> waiting, std::int64_t step) {
  return {unit, stage, MemberState{unit + "-s" + std::to_string(stage), heartbeat, waiting, step}};
}

TEST(PipelineReplicas, AReplicaCountsOnceEachStageHasOneMemberAndWaitsOnceAllOfThemDo) {
  const std::vector<MemberState> replicas = pipeline_replicas(
      {part("a", 0, 5, 2.0, 10), part("a", 1, 4, 3.0, 12),  // complete, both waiting: since 3, at step 12
       part("b", 0, 5, 1.0, 10), part("b", 1, 6, std::nullopt, 10),  // complete, one stage still training
       part("c", 0, 5, 1.0, 10),                                      // stage 1 missing: not a replica
       part("d", 1, 5, 1.0, 10), part("d", 1, 5, 1.0, 10)},           // two members of one stage: not either
      2);
  ASSERT_EQ(replicas.size(), 2u);
  EXPECT_EQ(replicas[0].id, "a");
  EXPECT_EQ(replicas[0].last_heartbeat, 4);  // healthy only while its stalest stage is
  ASSERT_TRUE(replicas[0].waiting_since.has_value());
  EXPECT_EQ(*replicas[0].waiting_since, 3);
  EXPECT_EQ(replicas[0].step, 12);
  EXPECT_EQ(replicas[1].id, "b");
  EXPECT_FALSE(replicas[1].waiting_since.has_value());
}

TEST(CommitByStage, HashesAreComparedWithinAStageAndOneStagesAbortHoldsForAll) {
  const std::vector<Ids> stages = {{"a0", "b0", "c0"}, {"a1", "b1", "c1"}};
  std::vector<Vote> votes = {{"a0", true, "x"}, {"b0", true, "x"}, {"c0", true, "y"},
                             {"a1", true, "p"}, {"b1", true, "p"}};
  EXPECT_EQ(decide_commit_by_stage(stages, votes, false, 1)[1].outcome, Outcome::pending);  // c1 has not voted
  EXPECT_EQ(decide_commit_by_stage(stages, votes, false, 1)[0].outcome, Outcome::pending);
  votes.push_back({"c1", true, "p"});
  const std::vector<CommitDecision> committed = decide_commit_by_stage(stages, votes, false, 1);
  ASSERT_EQ(committed.size(), 2u);
  EXPECT_EQ(committed[0].outcome, Outcome::commit);
  EXPECT_EQ(committed[0].canonical_hash, "x");  // stage 0's most common, not stage 1's
  EXPECT_EQ(committed[1].canonical_hash, "p");
  EXPECT_EQ(committed[0].outliers, Ids{"c0"});  // c0 heals in stage 0's group; stage 1 shares nothing
  EXPECT_TRUE(committed[1].outliers.empty());
  votes.back() = {"c1", false, ""};
  const std::vector<CommitDecision> aborted = decide_commit_by_stage(stages, votes, false, 1);
  EXPECT_EQ(aborted[0].outcome, Outcome::abort);  // stage 0's votes all agreed: it aborts with stage 1
  EXPECT_NE(aborted[0].reason.find("stage 1: c1 could not complete"), std::string::npos) << aborted[0].reason;
}

class PipelineCoordinator : public ::testing::Test {
 protected:
  Coordinator c{CoordinatorOptions{{1, 0, 3, 5}, "run-1", 77, {}}};

  Credentials join(const std::string& name, const std::string& replica, int stage, double now = 0) {
    const JoinReply joined = c.join("run-1", name, now, PipelinePlace{replica, stage, 2});
    return {joined.member_id, joined.incarnation};
  }
};

TEST_F(PipelineCoordinator, EveryStageOfAQuorumGetsTheSameRanksAndAGroupOfItsOwn) {
  const auto a0 = join("rank-0", "r0", 0), a1 = join("rank-1", "r0", 1);
  const auto b0 = join("rank-2", "r1", 0), b1 = join("rank-3", "r1", 1);
  for (const auto& m : {a0, a1, b0}) c.request_quorum(m, 8, 1);
  c.tick(1);
  EXPECT_FALSE(c.take_quorum(a0)) << "replica r1's stage 1 still trains: r1 does not wait yet";
  EXPECT_NE(c.waiting_for(1).find("1 of 2 healthy members wait"), std::string::npos) << c.waiting_for(1);
  c.request_quorum(b1, 8, 2);
  c.tick(2);
  const auto q_a0 = c.take_quorum(a0), q_a1 = c.take_quorum(a1), q_b0 = c.take_quorum(b0), q_b1 = c.take_quorum(b1);
  ASSERT_TRUE(q_a0 && q_a1 && q_b0 && q_b1);
  EXPECT_EQ(q_a0->members, (Ids{"rank-0#1", "rank-2#1"}));  // stage 0 of r0 and r1, in the replicas' order
  EXPECT_EQ(q_a1->members, (Ids{"rank-1#1", "rank-3#1"}));
  EXPECT_EQ(q_a1->rank, 0);
  EXPECT_EQ(q_b1->rank, 1);
  EXPECT_EQ(q_a0->store_prefix, "loco/77/q1/s0/");
  EXPECT_EQ(q_b1->store_prefix, "loco/77/q1/s1/");
  EXPECT_EQ(q_a0->quorum_id, q_b1->quorum_id);

  // Stage 0's hashes differ from stage 1's by nature; the step commits with a canonical hash per stage.
  c.vote(a0, 1, 8, true, "h0", 3);
  c.vote(b0, 1, 8, true, "h0", 3);
  c.vote(a1, 1, 8, true, "h1", 3);
  c.tick(3);
  EXPECT_FALSE(c.take_decision(a0, 1, 8)) << "stage 1 of r1 has not voted: nothing is decided for any stage";
  c.vote(b1, 1, 8, true, "h1", 3);
  c.tick(3);
  const auto d_a0 = c.take_decision(a0, 1, 8), d_b1 = c.take_decision(b1, 1, 8);
  ASSERT_TRUE(d_a0 && d_b1);
  EXPECT_EQ(d_a0->outcome, Outcome::commit);
  EXPECT_EQ(d_a0->canonical_hash, "h0");
  EXPECT_EQ(d_b1->canonical_hash, "h1");
  EXPECT_FALSE(d_b1->heal);

  // One stage's failed exchange aborts the step for every stage.
  for (const auto& m : {a0, a1, b0, b1}) c.request_quorum(m, 16, 4);
  c.tick(4);
  for (const auto& m : {a0, a1, b0, b1}) ASSERT_TRUE(c.take_quorum(m));
  c.vote(a0, 1, 16, true, "h0", 5);
  c.vote(b0, 1, 16, true, "h0", 5);
  c.vote(a1, 1, 16, false, "", 5);
  c.tick(5);
  const auto d_b0 = c.take_decision(b0, 1, 16);
  ASSERT_TRUE(d_b0);
  EXPECT_EQ(d_b0->outcome, Outcome::abort);
  // Every voter took the abort; stage 1 of r1, whose own exchange went well, votes only now and gets the
  // same abort (it once opened a new synchronisation that no one else voted in, and waited for its
  // decision until the quorum broke).
  ASSERT_TRUE(c.take_decision(a0, 1, 16) && c.take_decision(a1, 1, 16));
  c.vote(b1, 1, 16, true, "h1", 6);
  c.tick(6);
  const auto d_b1_late = c.take_decision(b1, 1, 16);
  ASSERT_TRUE(d_b1_late);
  EXPECT_EQ(d_b1_late->outcome, Outcome::abort);
  EXPECT_NE(d_b1_late->reason.find("stage 1: rank-1#1 could not complete"), std::string::npos) << d_b1_late->reason;
  EXPECT_EQ(c.take_decision(b1, 1, 16)->outcome, Outcome::abort) << "asked again: the same answer";
}

TEST_F(PipelineCoordinator, AStageThatGoesTakesItsReplicaWithItAndTheNextMembersMeetUnderNewKeys) {
  const auto a0 = join("rank-0", "r0", 0);
  EXPECT_FALSE(c.take_pipeline(a0)) << "stage 1 of r0 has no member yet";
  const auto a1 = join("rank-1", "r0", 1);
  const auto b0 = join("rank-2", "r1", 0), b1 = join("rank-3", "r1", 1);
  const auto pipeline = c.take_pipeline(a1);
  ASSERT_TRUE(pipeline);
  EXPECT_EQ(pipeline->members, (Ids{"rank-0#1", "rank-1#1"}));
  EXPECT_EQ(pipeline->store_prefix, "loco/77/pipeline/r0/g0/");
  for (const auto& m : {a0, a1, b0, b1}) c.request_quorum(m, 0, 1);
  c.tick(1);
  for (const auto& m : {a0, a1, b0, b1}) ASSERT_TRUE(c.take_quorum(m));

  // Stage 1 of r0 dies (its launcher reports it): stage 0 of r0 is removed with it, r1 learns its quorum broke.
  c.leave(a1, "its process was killed", 2);
  test::expect_refusal([&] { c.heartbeat(a0, 2); }, Refusal::unknown_member, "rank-0#1");
  EXPECT_TRUE(c.heartbeat(b0, 2).quorum_broken);
  EXPECT_NE(c.status(2).dump().find("whose stage 1 is gone"), std::string::npos);

  // r1 goes on alone; r0's stages start again, and their pipeline meets under the next generation's keys.
  for (const auto& m : {b0, b1}) c.request_quorum(m, 4, 3);
  c.tick(3);
  const auto alone = c.take_quorum(b1);
  ASSERT_TRUE(alone && c.take_quorum(b0));
  EXPECT_EQ(alone->members, Ids{"rank-3#1"});
  EXPECT_EQ(alone->quorum_id, 2);
  const auto a0_again = join("rank-0", "r0", 0, 4), a1_again = join("rank-1", "r0", 1, 4);
  const auto next = c.take_pipeline(a0_again);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->store_prefix, "loco/77/pipeline/r0/g1/");
  for (const auto& m : {a0_again, a1_again}) c.request_quorum(m, 0, 5);
  for (const auto& m : {b0, b1}) c.request_quorum(m, 8, 5);
  c.tick(5);
  const auto rejoined = c.take_quorum(a1_again);
  ASSERT_TRUE(rejoined);
  EXPECT_EQ(rejoined->members, (Ids{"rank-1#2", "rank-3#1"}));
  EXPECT_EQ(rejoined->step, 8) << "the new replica is behind: it heals to the others' step";
  EXPECT_EQ(rejoined->steps, (std::vector<std::int64_t>{0, 8}));
}

TEST_F(PipelineCoordinator, AStagesRestartReplacesItsPredecessorAndFinishingBreaksNothing) {
  const auto a0 = join("rank-0", "r0", 0), a1 = join("rank-1", "r0", 1);
  c.heartbeat(a0, 0.5);
  c.heartbeat(a1, 0.5);
  // The process of stage 1 started again before anyone reported the old one's death.
  const auto a1_again = join("rank-1", "r0", 1, 1);
  test::expect_refusal([&] { c.heartbeat(a1, 1); }, Refusal::unknown_member, "rank-1#1");
  test::expect_refusal([&] { c.heartbeat(a0, 1); }, Refusal::unknown_member, "rank-0#1");
  EXPECT_FALSE(c.take_pipeline(a1_again)) << "stage 0 must start again too";
  const auto a0_again = join("rank-0", "r0", 0, 2);
  ASSERT_TRUE(c.take_pipeline(a0_again));
  // A stage that finished the run leaves its replica's others be: they finish too; so does one that leaves
  // for another reason once the run is finished (it was told so).
  c.request_quorum(a0_again, 8, 2.5);  // at the run's last step
  c.request_quorum(a1_again, 8, 2.5);
  c.tick(2.5);
  ASSERT_TRUE(c.take_quorum(a0_again) && c.take_quorum(a1_again));
  c.leave(a0_again, "finished the run", 3, /*finished=*/true);
  c.heartbeat(a1_again, 3);
  const auto b0 = join("rank-2", "r1", 0, 3), b1 = join("rank-3", "r1", 1, 3);
  c.heartbeat(b0, 3.5);
  c.leave(b0, "process ended", 4);
  c.heartbeat(b1, 4);
}

// A join whose answer was lost is tried again: the member it made was never heard of, and taking its place
// does not break the replica (the pipeline's keys stay the generation's).
TEST_F(PipelineCoordinator, AJoinTriedAgainDoesNotBreakItsReplica) {
  const auto a0 = join("rank-0", "r0", 0);
  c.heartbeat(a0, 0.5);
  join("rank-1", "r0", 1, 1);  // its answer lost
  const auto a1 = join("rank-1", "r0", 1, 1.2);
  c.heartbeat(a0, 1.5);  // still a member
  const auto pipeline = c.take_pipeline(a1);
  ASSERT_TRUE(pipeline);
  EXPECT_EQ(pipeline->members, (Ids{"rank-0#1", "rank-1#2"}));
  EXPECT_EQ(pipeline->store_prefix, "loco/77/pipeline/r0/g0/");
}

// A vote before any quorum formed is refused (there is nothing it could be a vote in), never a crash.
TEST_F(PipelineCoordinator, AVoteBeforeAnyQuorumIsRefused) {
  const auto a0 = join("rank-0", "r0", 0);
  test::expect_refusal([&] { c.vote(a0, 0, 0, true, "h", 1); }, Refusal::stale_quorum, "quorum 0");
  c.tick(1);
}

TEST_F(PipelineCoordinator, StagesThatFallSilentTogetherExpireTogether) {
  const auto a0 = join("rank-0", "r0", 0), a1 = join("rank-1", "r0", 1);
  const auto b0 = join("rank-2", "r1", 0), b1 = join("rank-3", "r1", 1);
  c.heartbeat(b0, 3);
  c.heartbeat(b1, 3);
  c.tick(4);  // r0's stages last beat at 0: both expire, the second already gone with the first
  test::expect_refusal([&] { c.heartbeat(a0, 4); }, Refusal::unknown_member, "rank-0#1");
  test::expect_refusal([&] { c.heartbeat(a1, 4); }, Refusal::unknown_member, "rank-1#1");
  EXPECT_FALSE(c.heartbeat(b1, 4).quorum_broken);
  ASSERT_TRUE(c.take_pipeline(b0));
}

TEST_F(PipelineCoordinator, JoinsThatDisagreeOnTheShapeAreRefused) {
  join("rank-0", "r0", 0);
  test::expect_refusal([&] { c.join("run-1", "rank-9", 0, PipelinePlace{"r4", 0, 3}); }, Refusal::malformed,
          "has 3 stages, but this run's members have 2");
  test::expect_refusal([&] { c.join("run-1", "rank-9", 0); }, Refusal::malformed, "has 1 stages");
  test::expect_refusal([&] { c.join("run-1", "rank-9", 0, PipelinePlace{"r4", 2, 2}); }, Refusal::malformed, "stage 2 of 2");
  test::expect_refusal([&] { c.join("run-1", "rank-9", 0, PipelinePlace{"r 4", 1, 2}); }, Refusal::malformed, "'r 4'");
  test::expect_refusal([&] { pipeline_place(nlohmann::json{{"pipeline", {{"replica", "r"}, {"stage", -1}, {"stages", 2}}}}); },
          Refusal::malformed, "stage -1");
  EXPECT_EQ(signed_join_name("rank-1", PipelinePlace{"r0", 1, 2}), "rank-1|r0|1|2");
  // Once every member is gone, the next ones set the run's shape anew (a mistaken first join does not stay).
  Coordinator fresh{CoordinatorOptions{{1, 0, 3, 5}, "run-1", 77, {}}};
  const JoinReply mistaken = fresh.join("run-1", "x", 0, PipelinePlace{"r", 0, 5});
  fresh.leave({mistaken.member_id, 77}, "wrong dist.stages", 1);
  fresh.join("run-1", "rank-0", 2, PipelinePlace{"r0", 0, 2});
  EXPECT_EQ(signed_join_name("rank-1", PipelinePlace{}), "rank-1");
}

TEST(PipelineStart, TheFirstQuorumWaitsForEveryProcessTheLauncherStarted) {
  CoordinatorOptions options{{1, 0, 3, 5}, "run-1", 77, {}};
  options.start_members = 4;
  Coordinator c(options);
  std::vector<Credentials> members;
  const auto join = [&](int rank, double now) {
    const JoinReply joined = c.join("run-1", "rank-" + std::to_string(rank), now,
                                    PipelinePlace{"r" + std::to_string(rank / 2), rank % 2, 2});
    members.push_back({joined.member_id, joined.incarnation});
    c.request_quorum(members.back(), 0, now);
  };
  join(0, 0);
  join(1, 0);
  c.tick(1);  // r0 is every healthy replica, but two of the four processes have not joined
  EXPECT_FALSE(c.take_quorum(members[0]));
  EXPECT_NE(c.waiting_for(1).find("2 of the 4 member processes"), std::string::npos) << c.waiting_for(1);
  join(2, 2);
  join(3, 2);
  c.tick(2);
  EXPECT_TRUE(c.take_quorum(members[0]));
}

}  // namespace
}  // namespace loco::membership
