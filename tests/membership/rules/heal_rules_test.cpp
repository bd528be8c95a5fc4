// Who donates and who adopts a state (src/loco/membership/heal_rules.h) on hand-made quorums, and the
// SHA-256 the state is checked with (src/loco/membership/sha256.h) on FIPS 180-2's test vectors.
#include <gtest/gtest.h>

#include "loco/membership/heal_rules.h"
#include "loco/membership/sha256.h"

namespace loco::membership {
namespace {

using Ranks = std::vector<int>;

TEST(HealRules, MembersBehindAdoptTheLowestRankedUpToDateState) {
  const auto plan = plan_heal({8, 0, 8, 4}, {"h8", "h0", "h8", "h4"});
  EXPECT_EQ(plan.donor, 0);
  EXPECT_EQ(plan.canonical_hash, "h8");
  EXPECT_EQ(plan.receivers, (Ranks{1, 3}));
}

TEST(HealRules, NobodyAdoptsWhenEveryoneIsAlike) {
  const auto plan = plan_heal({8, 8, 8}, {"h", "h", "h"});
  EXPECT_EQ(plan.donor, 0);
  EXPECT_TRUE(plan.receivers.empty());
}

// Only up-to-date members vote on the canonical hash: two members behind that agree do not outvote one
// member at the furthest step.
TEST(HealRules, OnlyUpToDateMembersDecideTheCanonicalHash) {
  const auto plan = plan_heal({4, 4, 8}, {"old", "old", "new"});
  EXPECT_EQ(plan.donor, 2);
  EXPECT_EQ(plan.canonical_hash, "new");
  EXPECT_EQ(plan.receivers, (Ranks{0, 1}));
}

// An up-to-date member whose state differs from the most common one adopts it too, and does not donate
// even when it is the lowest-ranked.
TEST(HealRules, AnUpToDateOutlierAdoptsTheCommonState) {
  const auto plan = plan_heal({8, 8, 8, 0}, {"bad", "good", "good", "h0"});
  EXPECT_EQ(plan.donor, 1);
  EXPECT_EQ(plan.canonical_hash, "good");
  EXPECT_EQ(plan.receivers, (Ranks{0, 3}));
}

// NoLoCo's replicas differ by design: only the member behind adopts a state, from the lowest-ranked
// up-to-date member (every hash is as common as the others).
TEST(HealRules, WhenReplicasDifferOnlyMembersBehindAdopt) {
  const auto plan = plan_heal({8, 8, 0, 8}, {"x", "y", "z", "w"}, ReplicasAlike::no);
  EXPECT_EQ(plan.donor, 0);
  EXPECT_EQ(plan.canonical_hash, "x");
  EXPECT_EQ(plan.receivers, (Ranks{2}));
  EXPECT_TRUE(plan_heal({8, 8}, {"x", "y"}, ReplicasAlike::no).receivers.empty());
}

TEST(HealRules, ATieGoesToTheLowestRankedMember) {
  const auto plan = plan_heal({8, 8, 0}, {"x", "y", "z"});
  EXPECT_EQ(plan.donor, 0);
  EXPECT_EQ(plan.canonical_hash, "x");
  EXPECT_EQ(plan.receivers, (Ranks{1, 2}));
}

TEST(HealRules, MismatchedInputIsRefused) {
  EXPECT_THROW(plan_heal({}, {}), std::invalid_argument);
  EXPECT_THROW(plan_heal({1, 2}, {"a"}), std::invalid_argument);
}

TEST(Sha256, MatchesTheStandardTestVectors) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, UpdatesInPiecesEqualOneUpdate) {
  const std::string text(1000, 'a');
  Sha256 pieces;
  for (std::size_t i = 0; i < text.size(); i += 7) {
    pieces.update(text.data() + i, std::min<std::size_t>(7, text.size() - i));
  }
  EXPECT_EQ(pieces.digest(), sha256(text));
}

// Note "sync-progress": at one step, the member whose synchronisation there is done is ahead of one whose
// synchronisation is still to do; two members still to do it do not outvote the one that did it.
TEST(HealRules, AtOneStepTheMemberWhoseSynchronisationIsDoneIsAhead) {
  HealPlan plan = plan_heal({28, 28}, {"pending", "done"}, ReplicasAlike::yes, {24, 28});
  EXPECT_EQ(plan.donor, 1);
  EXPECT_EQ(plan.canonical_hash, "done");
  EXPECT_EQ(plan.receivers, (Ranks{0}));
  plan = plan_heal({28, 28, 28}, {"pending", "pending", "done"}, ReplicasAlike::yes, {24, 24, 28});
  EXPECT_EQ(plan.donor, 2);
  EXPECT_EQ(plan.receivers, (Ranks{0, 1}));
  EXPECT_EQ(plan_heal({28, 28}, {"x", "y"}, ReplicasAlike::no, {24, 28}).receivers, (Ranks{0}));   // NoLoCo too
  EXPECT_EQ(plan_heal({28, 29}, {"a", "b"}, ReplicasAlike::yes, {28, 28}).receivers, (Ranks{0}));  // steps first
  // Without points, as before: the tie goes to the lowest rank.
  EXPECT_EQ(plan_heal({28, 28}, {"pending", "done"}).donor, 0);
  EXPECT_THROW(plan_heal({28, 28}, {"a", "b"}, ReplicasAlike::yes, {24}), std::invalid_argument);
}

}  // namespace
}  // namespace loco::membership
