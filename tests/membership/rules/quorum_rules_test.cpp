// The quorum rules (src/loco/membership/quorum_rules.h) on hand-made cases: no network, no threads.
#include <gtest/gtest.h>

#include "loco/membership/quorum_rules.h"

namespace loco::membership {
namespace {

QuorumRules rules(int min_replicas = 1) {
  return {min_replicas, /*start_replicas=*/0, /*heartbeat_timeout_s=*/3, /*join_window_s=*/5};
}

MemberState waiting(const std::string& id, double since, double heartbeat = 10, std::int64_t step = 0) {
  return {id, heartbeat, since, step};
}
MemberState busy(const std::string& id, double heartbeat = 10, std::int64_t step = 0) {
  return {id, heartbeat, std::nullopt, step};
}

using Ids = std::vector<std::string>;

TEST(QuorumRules, NeedsMinReplicas) {
  const auto d = decide_quorum({waiting("a", 9)}, Quorum{}, 10, rules(2));
  EXPECT_FALSE(d.form);
  EXPECT_NE(d.waiting_for.find("1 of the 2 replicas"), std::string::npos) << d.waiting_for;
  EXPECT_TRUE(decide_quorum({waiting("a", 9), waiting("b", 9)}, Quorum{}, 10, rules(2)).form);
}

TEST(QuorumRules, TheFirstQuorumWaitsForStartReplicas) {
  QuorumRules start = rules(2);
  start.start_replicas = 3;
  const auto d = decide_quorum({waiting("a", 9), waiting("b", 9)}, Quorum{}, 10, start);
  EXPECT_FALSE(d.form);
  EXPECT_NE(d.waiting_for.find("2 of the 3 replicas start_replicas"), std::string::npos) << d.waiting_for;
  EXPECT_TRUE(decide_quorum({waiting("a", 9), waiting("b", 9), waiting("c", 9)}, Quorum{}, 10, start).form);
  // Later quorums need min_replicas only.
  EXPECT_TRUE(decide_quorum({waiting("a", 9), waiting("b", 9)}, Quorum{1, {"a", "b", "c"}}, 10, start).form);
}

TEST(QuorumRules, FirstQuorumFormsAtOnceWhenEveryHealthyMemberWaits) {
  const auto d = decide_quorum({waiting("b", 9), waiting("a", 10)}, Quorum{}, 10, rules());
  ASSERT_TRUE(d.form);
  EXPECT_EQ(d.members, (Ids{"a", "b"}));  // sorted: the rank order
}

// Two halves of a partitioned run can never both form a quorum: half is not a majority, even after the
// join window.
TEST(QuorumRules, HalfOfTheHealthyMembersIsNotEnough) {
  const std::vector<MemberState> members = {waiting("a", 0), waiting("b", 0), busy("c"), busy("d")};
  const auto d = decide_quorum(members, Quorum{}, 10, rules());
  EXPECT_FALSE(d.form);
  EXPECT_NE(d.waiting_for.find("majority: 2 of 4"), std::string::npos) << d.waiting_for;
}

TEST(QuorumRules, AMajorityWaitsForTheJoinWindow) {
  const std::vector<MemberState> members = {waiting("a", 8), waiting("b", 9), busy("c")};
  const auto early = decide_quorum(members, Quorum{}, 10, rules());
  EXPECT_FALSE(early.form);
  ASSERT_TRUE(early.decide_again_at);
  EXPECT_DOUBLE_EQ(*early.decide_again_at, 13);  // the first request's time + join_window_s
  const auto late = decide_quorum(members, Quorum{}, 13, rules());
  ASSERT_TRUE(late.form);
  EXPECT_EQ(late.members, (Ids{"a", "b"}));
}

TEST(QuorumRules, FormsAtOnceWhenThePreviousQuorumIsBack) {
  const Quorum previous{4, {"a", "b"}};
  const auto d = decide_quorum({waiting("a", 10), waiting("b", 10), busy("c")}, previous, 10, rules());
  ASSERT_TRUE(d.form);
  EXPECT_EQ(d.members, (Ids{"a", "b"}));
  // With a member of the previous quorum missing, the others wait for the window.
  EXPECT_FALSE(decide_quorum({waiting("a", 10), waiting("c", 10), busy("b")}, previous, 10, rules()).form);
}

// A newcomer that waited long does not cut short the wait for a member of the previous quorum that is
// only a little late: the window runs from the first previous member's request.
TEST(QuorumRules, TheWindowRunsFromThePreviousQuorumsFirstRequest) {
  const Quorum previous{1, {"b", "c"}};
  const std::vector<MemberState> members = {waiting("a", 0), waiting("b", 10), busy("c")};
  const auto d = decide_quorum(members, previous, 10.1, rules());
  EXPECT_FALSE(d.form);
  ASSERT_TRUE(d.decide_again_at);
  EXPECT_DOUBLE_EQ(*d.decide_again_at, 15);
  // c is back in time: all three together.
  const auto back = decide_quorum({waiting("a", 0), waiting("b", 10), waiting("c", 10.2)}, previous, 10.2, rules());
  ASSERT_TRUE(back.form);
  EXPECT_EQ(back.members, (Ids{"a", "b", "c"}));
}

TEST(QuorumRules, SilentMembersDoNotCount) {
  // c's last heartbeat is older than the timeout: a and b are every healthy member.
  const auto d = decide_quorum({waiting("a", 10), waiting("b", 10), busy("c", /*heartbeat=*/6.9)}, Quorum{}, 10, rules());
  ASSERT_TRUE(d.form);
  EXPECT_EQ(d.members, (Ids{"a", "b"}));
  // A waiting member that went silent does not count either.
  EXPECT_FALSE(decide_quorum({waiting("a", 5, /*heartbeat=*/6)}, Quorum{}, 10, rules()).form);
  EXPECT_TRUE(is_healthy(busy("x", 7), 10, rules()));
  EXPECT_FALSE(is_healthy(busy("x", 6.99), 10, rules()));
}

// Three joiners at step 0 are a majority of the five healthy members, but a and b train at step 1000: the
// joiners wait for them (a quorum of their own would start the run afresh), past the join window too.
TEST(QuorumRules, MembersBehindWaitForTheMembersAheadOfThem) {
  const Quorum previous{7, {"a", "b"}};
  std::vector<MemberState> members = {busy("a", 10, 1000), busy("b", 10, 1000), waiting("x", 0), waiting("y", 0),
                                      waiting("z", 0)};
  const auto d = decide_quorum(members, previous, 10, rules(2));
  EXPECT_FALSE(d.form);
  EXPECT_NE(d.waiting_for.find("a member at step 1000"), std::string::npos) << d.waiting_for;
  // A member stopped at step 500 and continued does not lead them either.
  members[2] = waiting("x", 0, 10, 500);
  EXPECT_FALSE(decide_quorum(members, previous, 10, rules(2)).form);
  // Once a and b ask at their next synchronisation, everyone forms one quorum at once.
  members[0] = waiting("a", 10, 10, 1010);
  members[1] = waiting("b", 10, 10, 1010);
  const auto all = decide_quorum(members, previous, 10, rules(2));
  ASSERT_TRUE(all.form);
  EXPECT_EQ(all.members, (Ids{"a", "b", "x", "y", "z"}));
  // A member ahead that went silent no longer holds the others back.
  const auto silent = decide_quorum({busy("a", 1, 1000), waiting("x", 9, 10, 10), waiting("y", 9, 10, 10)}, Quorum{},
                                    10, rules(2));
  EXPECT_TRUE(silent.form);
}

TEST(QuorumRules, TheIdChangesWithTheMembersOnly) {
  const Quorum first = next_quorum(Quorum{}, {"a", "b"});
  EXPECT_EQ(first.id, 1);
  EXPECT_EQ(next_quorum(first, {"a", "b"}).id, 1);
  const Quorum smaller = next_quorum(first, {"a"});
  EXPECT_EQ(smaller.id, 2);
  EXPECT_EQ(smaller.members, (Ids{"a"}));
  EXPECT_EQ(next_quorum(smaller, {"a", "b"}).id, 3);
  EXPECT_EQ(next_quorum(smaller, {"a"}, /*renew=*/true).id, 3);  // after an abort
}

}  // namespace
}  // namespace loco::membership
