// Note "stage-agreement" (src/loco/elastic/stage_agreement.h): the stages of a pipeline replica, as threads
// over a local group, settle each attempt at a synchronisation alike. A stage that presumed a commit (its
// coordinator was replaced before it read the decision) applies nothing when another stage read an abort;
// an attempt that failed before its vote still settles once, pairing with the others' votes; stages out of
// step, or one that never answers, end with a CommError instead of a wrong pairing.
#include "loco/elastic/stage_agreement.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "loco/comm/comm_error.h"
#include "loco/comm/local/local_group.h"

namespace loco::elastic {
namespace {

using namespace std::chrono_literals;
using comm::Group;

TEST(StageAgreement, TheReplicaIsDoneOnlyWhenEveryStageIsDone) {
  using E = AttemptEnd;
  EXPECT_EQ(replica_end({E::done}), E::done);
  EXPECT_EQ(replica_end({E::done, E::done, E::done}), E::done);
  EXPECT_EQ(replica_end({E::done, E::retry, E::done}), E::retry);
  EXPECT_EQ(replica_end({E::retry, E::done}), E::retry);
  EXPECT_EQ(replica_end({E::retry}), E::retry);
}

// The coordinator was replaced after deciding an abort: stage 0 presumed a commit, stage 2 read the abort.
// Every stage learns that the replica retries, and which stage said so; a second attempt where all commit is
// done.
TEST(StageAgreement, APresumedCommitYieldsToAnAbortAnotherStageRead) {
  std::vector<AttemptEnd> first(3), second(3);
  std::vector<std::string> retrying(3);
  comm::run_local_replicas(3, [&](Group& stages) {
    StageAgreement agreement(stages);
    const auto s = static_cast<std::size_t>(stages.rank());
    agreement.open_attempt();
    first[s] = agreement.settle(stages.rank() == 2 ? AttemptEnd::retry : AttemptEnd::done);
    retrying[s] = agreement.retrying();
    // The vote settled the attempt: its end asks nothing of the others again.
    EXPECT_EQ(agreement.settle(AttemptEnd::done), first[s]);
    agreement.close_attempt(false);
    agreement.open_attempt();
    second[s] = agreement.settle(AttemptEnd::done);
    agreement.close_attempt(true);
  });
  for (std::size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(first[s], AttemptEnd::retry) << "stage " << s;
    EXPECT_EQ(retrying[s], "2") << "stage " << s;
    EXPECT_EQ(second[s], AttemptEnd::done) << "stage " << s;
  }
}

// Stage 1's exchange failed before it voted (its attempt settles as it ends); stage 0 voted and read a commit
// (no other outcome reaches it in a run, but its settlement must pair with stage 1's all the same) and learns
// that the replica retries. Then an overlapped exchange fails outside any attempt on stage 1 while stage 0
// votes: they pair again.
TEST(StageAgreement, AnAttemptThatFailedBeforeItsVotePairsWithTheOthersVotes) {
  std::vector<AttemptEnd> voted(2), overlapped(2);
  comm::run_local_replicas(2, [&](Group& stages) {
    StageAgreement agreement(stages);
    const auto s = static_cast<std::size_t>(stages.rank());
    agreement.open_attempt();
    if (stages.rank() == 0) voted[s] = agreement.settle(AttemptEnd::done);
    agreement.close_attempt(stages.rank() == 0);
    EXPECT_FALSE(agreement.attempt_open());
    overlapped[s] = agreement.settle(stages.rank() == 1 ? AttemptEnd::retry : AttemptEnd::done);
  });
  EXPECT_EQ(voted[0], AttemptEnd::retry);
  EXPECT_EQ(overlapped[0], AttemptEnd::retry);
  EXPECT_EQ(overlapped[1], AttemptEnd::retry);
}

// Stage 1 settled once more than stage 0 knows of (stand-in: a bare gather of its first settlement): the
// numbers differ, both stages say so, and every later settlement fails the same way.
TEST(StageAgreement, StagesOutOfStepStopWithACommError) {
  std::vector<std::string> errors(2), later(2);
  comm::run_local_replicas(2, [&](Group& stages) {
    const auto s = static_cast<std::size_t>(stages.rank());
    if (stages.rank() == 1) {
      const torch::Tensor all = torch::empty({4}, torch::kInt64);
      stages.all_gather(torch::tensor({std::int64_t{1}, std::int64_t{0}}, torch::kInt64), all);
    }
    StageAgreement agreement(stages);
    if (stages.rank() == 0) agreement.settle(AttemptEnd::done);  // pairs with stage 1's bare gather
    try {
      agreement.settle(AttemptEnd::done);
      ADD_FAILURE() << "stage " << s << " settled out of step";
    } catch (const comm::CommError& e) {
      errors[s] = e.what();
    }
    try {
      agreement.settle(AttemptEnd::done);
    } catch (const comm::CommError& e) {
      later[s] = e.what();
    }
  });
  for (std::size_t s = 0; s < 2; ++s) {
    EXPECT_NE(errors[s].find("the stages are out of step"), std::string::npos) << errors[s];
    EXPECT_EQ(later[s], errors[s]);
  }
  EXPECT_NE(
      errors[0].find("stage 1 of this pipeline replica is at its settlement 1 of a synchronisation, stage 0 at 2"),
      std::string::npos)
      << errors[0];
}

// A stage that never comes (gone, or stuck past the group's timeout): the settlement gives up with a CommError
// (the stage then stops and its replica starts again), and does not wait a second time.
TEST(StageAgreement, AStageThatNeverAnswersEndsTheAgreement) {
  comm::GroupOptions options;
  options.timeout = 200ms;
  auto groups = comm::make_local_groups(2, options);
  StageAgreement agreement(*groups[0]);
  agreement.open_attempt();
  try {
    agreement.settle(AttemptEnd::done);
    ADD_FAILURE() << "settled without stage 1";
  } catch (const comm::CommError& e) {
    EXPECT_NE(std::string(e.what()).find("the stages of this pipeline replica could not agree how the synchronisation "
                                         "ended"),
              std::string::npos)
        << e.what();
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(agreement.close_attempt(true), comm::CommError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 100ms);
}

}  // namespace
}  // namespace loco::elastic
