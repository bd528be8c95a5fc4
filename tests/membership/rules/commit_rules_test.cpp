// Two-phase synchronisation decisions (src/loco/membership/commit_rules.h) on hand-made votes.
#include <gtest/gtest.h>

#include "loco/membership/commit_rules.h"

namespace loco::membership {
namespace {

using Ids = std::vector<std::string>;
const Ids kQuorum = {"a", "b", "c"};

TEST(CommitRules, CommitsWhenEveryMemberVotedTheSameHash) {
  const auto d = decide_commit(kQuorum, {{"b", true, "h1"}, {"a", true, "h1"}, {"c", true, "h1"}}, false, 2);
  EXPECT_EQ(d.outcome, Outcome::commit);
  EXPECT_EQ(d.canonical_hash, "h1");
  EXPECT_TRUE(d.outliers.empty());
}

TEST(CommitRules, WaitsForEveryVote) {
  const auto d = decide_commit(kQuorum, {{"a", true, "h1"}, {"c", true, "h1"}}, false, 2);
  EXPECT_EQ(d.outcome, Outcome::pending);
  EXPECT_NE(d.reason.find("2 of 3"), std::string::npos) << d.reason;
}

TEST(CommitRules, OneFailedMemberAbortsForEveryone) {
  const auto d = decide_commit(kQuorum, {{"a", true, "h1"}, {"b", false, ""}}, false, 2);
  EXPECT_EQ(d.outcome, Outcome::abort);  // at once: no need to wait for c
  EXPECT_NE(d.reason.find("b could not"), std::string::npos) << d.reason;
}

TEST(CommitRules, ABrokenQuorumOrTooFewMembersAbort) {
  EXPECT_EQ(decide_commit(kQuorum, {{"a", true, "h1"}}, /*broken=*/true, 2).outcome, Outcome::abort);
  const auto small = decide_commit({"a"}, {{"a", true, "h1"}}, false, 2);
  EXPECT_EQ(small.outcome, Outcome::abort);
  EXPECT_NE(small.reason.find("min_replicas 2"), std::string::npos) << small.reason;
}

// The most common hash is canonical; the others must heal. On a tie the lowest-ranked member's wins.
// A member checks the outliers it is told of: only a coordinator that lies names every member, a stranger, or an
// unsorted list (audit round 11: every member named read past the quorum, SIGSEGV).
TEST(CommitRules, ImpossibleOutliersAreNamed) {
  const Ids members = {"a#1", "b#1", "c#1"};
  EXPECT_EQ(impossible_outliers({}, members), "");
  EXPECT_EQ(impossible_outliers({"b#1"}, members), "");
  EXPECT_EQ(impossible_outliers({"a#1", "c#1"}, members), "");
  EXPECT_EQ(impossible_outliers({"a#1", "b#1", "c#1"}, members), "it names every member an outlier");
  EXPECT_EQ(impossible_outliers({"c#1", "a#1"}, members), "its outliers are not a sorted list of distinct members");
  EXPECT_EQ(impossible_outliers({"a#1", "a#1"}, members), "its outliers are not a sorted list of distinct members");
  EXPECT_EQ(impossible_outliers({"z#9"}, members), "it names z#9 an outlier, who is no member of the quorum");
  // An honest decision's outliers never are impossible.
  const auto honest = decide_commit(members, {{"a#1", true, "h1"}, {"b#1", true, "h2"}, {"c#1", true, "h2"}}, false, 1);
  EXPECT_EQ(impossible_outliers(honest.outliers, members), "");
}

TEST(CommitRules, TheMostCommonHashIsCanonical) {
  const auto d = decide_commit(kQuorum, {{"a", true, "h2"}, {"b", true, "h1"}, {"c", true, "h1"}}, false, 2);
  EXPECT_EQ(d.outcome, Outcome::commit);
  EXPECT_EQ(d.canonical_hash, "h1");
  EXPECT_EQ(d.outliers, (Ids{"a"}));
  const auto tie = decide_commit({"a", "b"}, {{"b", true, "hb"}, {"a", true, "ha"}}, false, 2);
  EXPECT_EQ(tie.canonical_hash, "ha");
  EXPECT_EQ(tie.outliers, (Ids{"b"}));
}

}  // namespace
}  // namespace loco::membership
