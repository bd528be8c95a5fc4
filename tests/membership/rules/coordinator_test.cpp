// The coordinator's state (src/loco/membership/coordinator.h) with explicit times: joins, fencing,
// quorums served once, expiry and leaves breaking a quorum, status and metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "loco/membership/coordinator.h"
#include "loco/membership/membership_error.h"
#include "loco/util/error.h"
#include "membership/rules/expect_refusal.h"

namespace loco::membership {
namespace {

using Ids = std::vector<std::string>;

Coordinator make(int min_replicas = 1) {
  return Coordinator(CoordinatorOptions{{min_replicas, /*start_replicas=*/0, /*heartbeat_timeout_s=*/3, /*join_window_s=*/5}, "run-1", 77, {}});
}

Credentials who(const JoinReply& joined) { return {joined.member_id, joined.incarnation}; }

using test::expect_refusal;

// Members a#1 and b#1, joined at t=0, in quorum 1 formed at t=1 (both served).
std::pair<Credentials, Credentials> quorum_of_two(Coordinator& c) {
  const auto a = who(c.join("run-1", "a", 0));
  const auto b = who(c.join("run-1", "b", 0));
  c.request_quorum(a, 5, 1);
  c.request_quorum(b, 5, 1);
  c.tick(1);
  EXPECT_TRUE(c.take_quorum(a) && c.take_quorum(b));
  return {a, b};
}

// A member whose pseudo-gradients a majority of a synchronisation's members rejected (NaN or Inf) in
// max_rejections synchronisations is removed and its name barred; one member's word counts for nothing, so a
// liar cannot remove another.
TEST(Coordinator, AMemberRejectedByTheMajorityRepeatedlyIsRemovedAndBarred) {
  CoordinatorOptions options{{1, 0, 3, 5}, "run-1", 77, /*max_rejections=*/2, {}};
  Coordinator c(options);
  const auto a = who(c.join("run-1", "a", 0)), b = who(c.join("run-1", "b", 0)), x = who(c.join("run-1", "x", 0));
  for (const auto& m : {a, b, x}) c.request_quorum(m, 5, 1);
  c.tick(1);
  for (const auto& m : {a, b, x}) ASSERT_TRUE(c.take_quorum(m));
  const Ids by_majority = {x.member_id}, none = {};
  const auto synchronise = [&](std::int64_t step, const Ids& a_says, const Ids& b_says, const Ids& x_says) {
    c.vote(x, 1, step, true, "h", 2, x_says);
    c.vote(a, 1, step, true, "h", 2, a_says);
    c.vote(b, 1, step, true, "h", 2, b_says);
  };
  synchronise(10, by_majority, by_majority, {a.member_id});  // x rejected once; x's word against a counts nothing
  synchronise(20, by_majority, none, {a.member_id});         // one member's word: not counted
  EXPECT_TRUE(c.status(3).dump().find("\"x#1\"") != std::string::npos);
  synchronise(30, by_majority, by_majority, {a.member_id});  // the second: removed
  expect_refusal([&] { c.heartbeat(x, 3); }, Refusal::unknown_member, "x#1");
  EXPECT_TRUE(c.heartbeat(a, 3).quorum_broken);
  expect_refusal([&] { c.join("run-1", "x", 4); }, Refusal::barred, "member name 'x' was removed");
  c.heartbeat(a, 4);  // a, the liar's target, is still a member
  EXPECT_NE(c.status(4).dump().find("expel"), std::string::npos);
}

TEST(Coordinator, JoinsGetUniqueIdsAndStrangersAreRefused) {
  Coordinator c = make();
  const JoinReply a1 = c.join("run-1", "host-0", 0);
  const JoinReply a2 = c.join("run-1", "host-0", 1);  // the same process name, restarted: a new member
  EXPECT_EQ(a1.member_id, "host-0#1");
  EXPECT_EQ(a2.member_id, "host-0#2");
  EXPECT_EQ(a1.incarnation, 77u);
  expect_refusal([&] { c.join("run-2", "host-1", 1); }, Refusal::wrong_run, "run-2");
  expect_refusal([&] { c.join("run-1", "bad name!", 1); }, Refusal::malformed, "bad name!");
  expect_refusal([&] { c.heartbeat({a1.member_id, 76}, 1); }, Refusal::stale_incarnation, "incarnation 76");
  expect_refusal([&] { c.heartbeat({"nobody#1", 77}, 1); }, Refusal::unknown_member, "nobody#1");
}

// Every member name is remembered for the run (ids go on from a name's last), up to kMaxMemberNames: a member
// making names up cannot grow the coordinator without end; names it knows still join.
TEST(Coordinator, TheMemberNamesARunRemembersAreBounded) {
  Coordinator c = make();
  for (std::size_t n = 0; n < kMaxMemberNames; ++n) {
    const auto m = who(c.join("run-1", "n" + std::to_string(n), 0));
    c.leave(m, "made up", 0);
  }
  expect_refusal([&] { c.join("run-1", "one-more", 1); }, Refusal::malformed, "this run has seen 100000 member names");
  EXPECT_EQ(c.join("run-1", "n7", 1).member_id, "n7#2");
}

TEST(Coordinator, AQuorumIsServedOnceToEachOfItsMembers) {
  Coordinator c = make(2);
  const auto a = who(c.join("run-1", "a", 0));
  const auto b = who(c.join("run-1", "b", 0));
  c.request_quorum(b, 10, 1);
  c.tick(1);
  EXPECT_FALSE(c.take_quorum(b));  // 1 of min 2
  EXPECT_NE(c.waiting_for(1).find("min_replicas"), std::string::npos);
  c.request_quorum(a, 7, 2);  // a is behind b
  c.tick(2);
  const auto qa = c.take_quorum(a);
  const auto qb = c.take_quorum(b);
  ASSERT_TRUE(qa && qb);
  EXPECT_EQ(qa->quorum_id, 1);
  EXPECT_EQ(qa->members, (Ids{"a#1", "b#1"}));
  EXPECT_EQ(qa->rank, 0);
  EXPECT_EQ(qb->rank, 1);
  EXPECT_EQ(qa->store_prefix, "loco/77/q1/");
  EXPECT_EQ(qa->step, 10);  // the furthest of its members' steps
  EXPECT_EQ(qa->steps, (std::vector<std::int64_t>{7, 10}));
  EXPECT_FALSE(c.take_quorum(a));  // once
  // The same members at the next synchronisation point: the same quorum id, counted but not logged again
  // (data parallel asks every step).
  const auto quorum_events = [&](double now) {
    const nlohmann::json events = c.status(now).at("events");
    return std::count_if(events.begin(), events.end(), [](const nlohmann::json& e) { return e.at("kind") == "quorum"; });
  };
  EXPECT_EQ(quorum_events(2), 1);
  c.request_quorum(a, 20, 3);
  c.request_quorum(b, 20, 3);
  c.tick(3);
  EXPECT_EQ(c.take_quorum(a)->quorum_id, 1);
  EXPECT_EQ(quorum_events(3), 1);
  EXPECT_NE(c.metrics_text(3).find("loco_membership_events_total{kind=\"quorum\"} 2"), std::string::npos)
      << c.metrics_text(3);
  // The run's progress, public: the furthest step asked at, and not finished.
  EXPECT_EQ(c.status(3).at("furthest_step"), 20);
  EXPECT_EQ(c.status(3).at("finished"), false);
}

// Quorum 1 of a#1 and b#1 (quorum_of_two), asked for again by both at step 10 at t=2: a's reply there (each
// took its own; a's reply at step 5 has the serial two before).
struct AskedAgain {
  Credentials a, b;
  QuorumReply a_at_10;
};
AskedAgain asked_again_at_10(Coordinator& c) {
  const auto [a, b] = quorum_of_two(c);
  c.request_quorum(a, 10, 2, 0);
  c.request_quorum(b, 10, 2, 0);
  c.tick(2);
  const auto qa = c.take_quorum(a);
  EXPECT_TRUE(qa && c.take_quorum(b));
  return {a, b, qa.value_or(QuorumReply{})};
}

// A member whose answer was lost on the way asks again at the same step, saying it received an earlier
// reply: it is given its reply again while the quorum stands (the others meet in its group). One that
// received it (its exchange failed and its failure vote was lost too) waits for a new quorum, as does one
// whose quorum broke or aborted a synchronisation meanwhile.
TEST(Coordinator, AReplyWhoseAnswerWasLostIsServedAgainWhileItsQuorumStands) {
  Coordinator c = make(2);
  const auto [a, b, qa] = asked_again_at_10(c);
  const std::int64_t received_at_5 = qa.serial - 2;
  EXPECT_GT(received_at_5, 0);
  // a's answer was lost: it still holds the serial of its reply at step 5.
  c.request_quorum(a, 10, 2.5, received_at_5);
  c.tick(2.5);
  const auto again = c.take_quorum(a);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->serial, qa.serial);
  EXPECT_EQ(again->store_prefix, qa.store_prefix);
  EXPECT_EQ(again->rank, qa.rank);
  EXPECT_EQ(again->steps, qa.steps);
  // Received, and asked again at the same step: a new request, which waits for b.
  c.request_quorum(a, 10, 3, qa.serial);
  c.tick(3);
  EXPECT_FALSE(c.take_quorum(a));
  c.request_quorum(b, 10, 3, qa.serial + 1);
  c.tick(3);
  const auto next = c.take_quorum(a);
  ASSERT_TRUE(next);
  EXPECT_GT(next->serial, qa.serial + 1);  // newly formed
}

TEST(Coordinator, ALostReplyIsNotServedAgainAtAnotherStepOrOnceItsQuorumBrokeOrAborted) {
  // Asked at another step: a new request, whatever the member received.
  Coordinator c = make(2);
  const auto [a, b] = quorum_of_two(c);
  c.request_quorum(a, 20, 2, 0);
  c.tick(2);
  EXPECT_FALSE(c.take_quorum(a));
  // A quorum that aborted a synchronisation is done for.
  Coordinator d = make(2);
  const auto [x, y, qx] = asked_again_at_10(d);
  d.vote(y, qx.quorum_id, 10, false, "", 3);
  d.tick(3);
  d.request_quorum(x, 10, 3, qx.serial - 2);
  d.tick(3);
  EXPECT_FALSE(d.take_quorum(x));
  // So is one that broke (a member left).
  Coordinator e = make(2);
  const auto [u, v, qu] = asked_again_at_10(e);
  e.leave(v, "preempted", 3);
  e.request_quorum(u, 10, 3, qu.serial - 2);
  e.tick(3);
  EXPECT_FALSE(e.take_quorum(u));
}

// The coordinator's own stall (its process stopped for 8 s) is no member's silence: each member's window moves on
// by the stall, so none expires on waking (before, one was expelled, whichever heartbeat was read first); a
// member silent beyond that still expires.
TEST(Coordinator, ItsOwnStallExpiresNoMember) {
  Coordinator c = make();
  const auto members = quorum_of_two(c);
  const Credentials &a = members.first, &b = members.second;
  c.heartbeat(a, 2);
  c.heartbeat(b, 2);
  c.excuse_stall(10, 8);  // ticks at 2, then at 10
  c.tick(10);
  EXPECT_FALSE(c.heartbeat(a, 10).quorum_broken);
  EXPECT_EQ(c.status(10).at("members").size(), 2u);
  EXPECT_EQ(c.status(10).at("events").back().at("kind"), "stall");
  c.heartbeat(a, 12);
  c.tick(13.5);  // b silent for 3.5 s of the coordinator's running time
  EXPECT_TRUE(c.heartbeat(a, 13.5).quorum_broken);
  expect_refusal([&] { c.heartbeat(b, 13.6); }, Refusal::unknown_member, "rejoin");
}

TEST(Coordinator, ASilentMemberExpiresAndBreaksItsQuorum) {
  Coordinator c = make();
  const auto members = quorum_of_two(c);
  const Credentials &a = members.first, &b = members.second;
  EXPECT_FALSE(c.heartbeat(a, 2).quorum_broken);
  c.heartbeat(a, 3.5);
  EXPECT_DOUBLE_EQ(c.tick(3.5), 1 + 3);  // b's heartbeat (at its request, t=1) expires next
  c.tick(4.1);                           // b silent for 3.1 s
  EXPECT_TRUE(c.heartbeat(a, 4.1).quorum_broken);
  expect_refusal([&] { c.heartbeat(b, 4.2); }, Refusal::unknown_member, "rejoin");
  const nlohmann::json status = c.status(4.2);
  EXPECT_EQ(status.at("members").size(), 1u);
  EXPECT_EQ(status.at("events").back().at("kind"), "expire");
  EXPECT_TRUE(status.at("quorum").at("broken").get<bool>());
  // The survivor's next quorum has a new id and is whole again.
  c.request_quorum(a, 10, 4.3);
  c.tick(4.3);
  const auto next = c.take_quorum(a);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->quorum_id, 2);
  EXPECT_EQ(next->members, (Ids{"a#1"}));
  EXPECT_FALSE(c.heartbeat(a, 4.4).quorum_broken);
}

TEST(Coordinator, ALeaveBreaksTheQuorumAtOnce) {
  Coordinator c = make();
  const auto members = quorum_of_two(c);
  const Credentials &a = members.first, &b = members.second;
  c.leave(b, "preempted", 1.5);
  EXPECT_TRUE(c.heartbeat(a, 1.6).quorum_broken);
  const std::string metrics = c.metrics_text(1.6);
  EXPECT_NE(metrics.find("loco_quorum_id 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("loco_quorum_broken 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("loco_members{state=\"joined\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("loco_membership_events_total{kind=\"leave\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(c.status(1.6).at("events").back().at("detail").get<std::string>().find("preempted"), std::string::npos);
}

// A leave's reason is kept to 256 bytes, never cut inside a character: a cut one would make every later
// /status unwritable (nlohmann::json::dump refuses invalid UTF-8), so the dashboard would answer 500.
TEST(Coordinator, ALongReasonOfManyByteCharactersIsCutBetweenThem) {
  Coordinator c = make();
  const auto members = quorum_of_two(c);
  std::string reason = "x";
  for (int i = 0; i < 200; ++i) reason += "\u00e9";  // 2 bytes each: byte 256 is the first of one
  c.leave(members.second, reason, 1.5);
  const std::string page = c.status(1.6).dump();
  const std::string detail = c.status(1.6).at("events").back().at("detail").get<std::string>();
  EXPECT_NE(detail.find("x\u00e9\u00e9"), std::string::npos) << detail;
  EXPECT_LT(detail.size(), 256u + 32u);
}

// A member that another quorum left behind (it did not ask in time) learns from its heartbeat that its
// quorum is no longer the run's.
TEST(Coordinator, AQuorumFormedWithoutAMemberSupersedesItsQuorum) {
  Coordinator c = make();
  const auto a = who(c.join("run-1", "a", 0));
  const auto b = who(c.join("run-1", "b", 0));
  const auto d = who(c.join("run-1", "d", 0));
  for (const auto& m : {a, b, d}) c.request_quorum(m, 5, 1);
  c.tick(1);
  for (const auto& m : {a, b, d}) c.take_quorum(m);
  c.request_quorum(a, 10, 2);
  c.request_quorum(b, 10, 2);
  for (const auto& m : {a, b, d}) c.heartbeat(m, 6.5);
  c.tick(7.5);  // a and b waited the join window (5 s): a majority of three goes on without d
  EXPECT_EQ(c.take_quorum(a)->quorum_id, 2);
  EXPECT_TRUE(c.heartbeat(d, 7.6).quorum_broken);
  EXPECT_FALSE(c.heartbeat(a, 7.6).quorum_broken);
}

TEST(Coordinator, AnOuterStepCommitsOnceEveryMemberVoted) {
  Coordinator c = make();
  const auto members = quorum_of_two(c);
  const Credentials &a = members.first, &b = members.second;
  c.vote(a, 1, 100, true, "h1", 2);
  c.tick(2);
  EXPECT_FALSE(c.take_decision(a, 1, 100));  // b has not voted
  c.vote(b, 1, 100, true, "h2", 2.1);
  c.tick(2.1);
  const auto da = c.take_decision(a, 1, 100);
  const auto db = c.take_decision(b, 1, 100);
  ASSERT_TRUE(da && db);
  EXPECT_EQ(da->outcome, Outcome::commit);
  EXPECT_EQ(da->canonical_hash, "h1");  // a tie: the lowest rank's
  EXPECT_FALSE(da->heal);
  EXPECT_TRUE(db->heal);
  EXPECT_EQ(c.status(2.2).at("events").back().at("kind"), "commit");
  // A vote for a quorum that is not the member's current one is refused, and nothing is recorded.
  expect_refusal([&] { c.vote(a, 7, 200, true, "h", 2.3); }, Refusal::stale_quorum, "quorum 7");
}

TEST(Coordinator, AMemberLostBeforeItVotedAbortsTheOuterStep) {
  Coordinator c = make();
  const auto members = quorum_of_two(c);
  const Credentials &a = members.first, &b = members.second;
  c.vote(a, 1, 100, true, "h1", 2);
  c.leave(b, "preempted", 2.5);
  c.tick(2.5);
  // A repeated vote (its long poll ended before the decision) only asks for the decision.
  EXPECT_NO_THROW(c.vote(a, 1, 100, false, "", 2.6));
  const auto d = c.take_decision(a, 1, 100);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->outcome, Outcome::abort);
  EXPECT_NE(d->reason.find("left"), std::string::npos) << d->reason;
  EXPECT_EQ(c.take_decision(a, 1, 100)->outcome, Outcome::abort);  // asked again (an answer lost): the same
}

// One failure vote aborts the step at once; the decision stays after the voters took it: a member that
// votes later gets the abort, and a member whose answer was lost can ask again.
TEST(Coordinator, AnAbortIsKeptForTheMembersThatVoteAfterIt) {
  Coordinator c = make();
  const auto [a, b] = quorum_of_two(c);
  c.vote(a, 1, 100, false, "", 2);
  c.tick(2);
  EXPECT_EQ(c.take_decision(a, 1, 100)->outcome, Outcome::abort);
  EXPECT_EQ(c.take_decision(a, 1, 100)->outcome, Outcome::abort);  // asked again: the same answer
  c.vote(b, 1, 100, true, "h", 2.5);
  c.tick(2.5);
  const auto late = c.take_decision(b, 1, 100);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->outcome, Outcome::abort);
  EXPECT_NE(late->reason.find("a#1 could not complete"), std::string::npos) << late->reason;
  EXPECT_EQ(c.take_decision(b, 1, 100)->outcome, Outcome::abort);  // b's answer was lost: it asks again
}

// Decisions are kept for the newest few synchronisations of a quorum only: a member asks for a step's
// decision before it trains the next.
TEST(Coordinator, DecisionsAreKeptForTheNewestSynchronisationsOfAQuorumOnly) {
  Coordinator c = make();
  const auto [a, b] = quorum_of_two(c);
  for (std::int64_t step = 100; step < 110; ++step) {
    c.vote(a, 1, step, true, "h", 2);
    c.vote(b, 1, step, true, "h", 2);
    c.tick(2);
    ASSERT_TRUE(c.take_decision(a, 1, step));
  }
  c.tick(3);
  EXPECT_FALSE(c.take_decision(b, 1, 105));
  for (std::int64_t step = 106; step < 110; ++step) EXPECT_TRUE(c.take_decision(b, 1, step)) << step;
}

// After an aborted synchronisation the next quorum has a new id even with the same members: the group
// of the aborted one may be out of step, and the new one needs fresh store keys.
TEST(Coordinator, AnAbortRenewsTheQuorumId) {
  Coordinator c = make();
  const auto members = quorum_of_two(c);
  const Credentials &a = members.first, &b = members.second;
  c.vote(a, 1, 100, true, "h1", 2);
  c.vote(b, 1, 100, false, "", 2);
  c.tick(2);
  EXPECT_EQ(c.take_decision(a, 1, 100)->outcome, Outcome::abort);
  c.request_quorum(a, 100, 2.1);
  c.request_quorum(b, 100, 2.1);
  c.tick(2.1);
  const auto again = c.take_quorum(a);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->quorum_id, 2);
  EXPECT_EQ(again->members, (Ids{"a#1", "b#1"}));
}

// Note "finish-claims": a member that says it finished the run while another is beyond its step (their
// train.steps differ), or at a step no quorum reached (a false claim), leaves like any other: the run is not
// marked finished, and nobody is told to stop.
TEST(Coordinator, AClaimToHaveFinishedTheRunIsCountedOnlyWhereTheRunGotTo) {
  Coordinator c = make(1);
  const auto [a, b] = quorum_of_two(c);  // at step 5
  c.request_quorum(a, 9, 2);             // a trains on (its train.steps is larger)
  c.leave(b, "finished the run", 2.5, /*finished=*/true);
  EXPECT_FALSE(c.status(2.6).at("finished").get<bool>());
  const std::string detail = c.status(2.6).at("events").back().at("detail");
  EXPECT_NE(detail.find("it says it finished the run at step 5, but a#1 is at step 9: not counted (do the members "
                        "have the same train.steps?)"),
            std::string::npos)
      << detail;
  c.tick(3);
  const auto go_on = c.take_quorum(a);
  ASSERT_TRUE(go_on);
  EXPECT_FALSE(go_on->run_finished);
  EXPECT_EQ(go_on->members, (Ids{"a#1"}));
  // A claim far beyond where any quorum formed.
  const auto liar = who(c.join("run-1", "liar", 4));
  c.request_quorum(liar, std::int64_t{1} << 39, 4);
  c.leave(liar, "finished the run", 4.5, /*finished=*/true);
  EXPECT_FALSE(c.status(4.6).at("finished").get<bool>());
  EXPECT_NE(c.status(4.6).at("events").back().at("detail").get<std::string>().find("but the run reached step 9 only"),
            std::string::npos);
  // A member that asked at an earlier step and healed to its quorum's finishes there: counted.
  const auto late = who(c.join("run-1", "late", 5));
  c.request_quorum(a, 13, 5);
  c.request_quorum(late, 0, 5);
  c.tick(5);
  ASSERT_TRUE(c.take_quorum(a) && c.take_quorum(late));
  c.leave(late, "finished the run", 5.5, /*finished=*/true);
  EXPECT_TRUE(c.status(5.6).at("finished").get<bool>()) << c.status(5.6).at("events").back();
}

// Note "bounded-votes": a member has at most one undecided vote in a quorum (it waits for each decision before
// it trains on), and rejects only members of the quorum; anything else is refused and opens nothing.
TEST(Coordinator, AMemberCannotOpenSynchronisationsWithoutEnd) {
  Coordinator c = make(2);
  const auto [a, b] = quorum_of_two(c);
  c.vote(a, 1, 10, true, "h", 2);
  expect_refusal([&] { c.vote(a, 1, 11, true, "h", 2.1); }, Refusal::malformed,
                 "a#1 voted for step 11 while its vote for step 10 is undecided");
  expect_refusal([&] { c.vote(b, 1, 10, true, "h", 2.1, {"nobody#7"}); }, Refusal::malformed,
                 "b#1's vote rejects 'nobody#7', which is no member of quorum 1");
  c.vote(b, 1, 10, true, "h", 2.2);
  c.tick(2.2);
  EXPECT_EQ(c.take_decision(a, 1, 10)->outcome, Outcome::commit);
  c.vote(a, 1, 11, true, "h", 2.3);  // decided: the next synchronisation is a's to vote in
  c.vote(b, 1, 11, true, "h", 2.3, {"a#1"});
  c.tick(2.3);
  EXPECT_EQ(c.take_decision(b, 1, 11)->outcome, Outcome::commit);
}

// Members that trained the run to its end say so when they leave; a member still behind is then told
// the run is over instead of waiting for a quorum that can never form.
// Note "no-fresh-restart": once a run got somewhere, members that all start from nothing (every process died
// and was started again without --resume) form no quorum: it would train the run again from step 0,
// silently. The run's first quorum still forms at step 0, and members that resumed from checkpoints go on.
TEST(Coordinator, MembersThatAllStartFromNothingDoNotTrainAReachedRunAgain) {
  Coordinator c = make(2);
  const auto a = who(c.join("run-1", "a", 0)), b = who(c.join("run-1", "b", 0));
  c.request_quorum(a, 0, 1);
  c.request_quorum(b, 0, 1);
  c.tick(1);
  ASSERT_TRUE(c.take_quorum(a) && c.take_quorum(b));  // the run starts at step 0
  c.request_quorum(a, 8, 2);
  c.request_quorum(b, 8, 2);
  c.tick(2);
  ASSERT_TRUE(c.take_quorum(a) && c.take_quorum(b));
  c.leave(a, "process ended", 3);
  c.leave(b, "process ended", 3);
  const auto a2 = who(c.join("run-1", "a", 4)), b2 = who(c.join("run-1", "b", 4));
  c.request_quorum(a2, 0, 4.5);
  c.tick(4.5);  // one is waiting: told why already, not that a second replica is missing
  EXPECT_NE(c.waiting_for(4.5).find("the run reached step 8 with this coordinator, but the 1 waiting replica is at "
                                    "step 0"),
            std::string::npos)
      << c.waiting_for(4.5);
  c.request_quorum(b2, 0, 5);
  c.tick(5);
  EXPECT_FALSE(c.take_quorum(a2));
  EXPECT_FALSE(c.take_quorum(b2));
  const std::string why = c.waiting_for(5);
  EXPECT_NE(why.find("the run reached step 8 with this coordinator, but the 2 waiting replicas are at step 0"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("--resume"), std::string::npos) << why;
  EXPECT_EQ(c.status(5).at("waiting_for").get<std::string>(), why);
  // One member resumed from its checkpoint of step 4: the run goes on from there, the others heal.
  const auto resumed = who(c.join("run-1", "c", 6));
  c.request_quorum(resumed, 4, 7);
  c.tick(7);
  const auto reply = c.take_quorum(resumed);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->step, 4);
  EXPECT_EQ(reply->steps, (std::vector<std::int64_t>{0, 0, 4}));
  EXPECT_TRUE(c.take_quorum(a2) && c.take_quorum(b2));
}

TEST(Coordinator, AMemberBehindIsToldThatTheRunFinished) {
  Coordinator c = make(2);
  const auto [a, b] = quorum_of_two(c);
  const auto late = who(c.join("run-1", "late", 2));
  c.request_quorum(a, 300, 3);
  c.request_quorum(b, 300, 3);
  c.tick(3);
  ASSERT_TRUE(c.take_quorum(a) && c.take_quorum(b));
  c.leave(a, "finished the run", 4, /*finished=*/true);
  c.request_quorum(late, 20, 5);
  const auto reply = c.take_quorum(late);
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->run_finished);
  EXPECT_EQ(reply->step, 300);
  EXPECT_EQ(reply->steps, (std::vector<std::int64_t>{20}));
  EXPECT_EQ(reply->members, (Ids{"late#1"}));
  EXPECT_EQ(c.status(5).at("finished"), true);  // what a scheduled return (dist.churn) waits on
  EXPECT_EQ(c.status(5).at("furthest_step"), 300);
  // Two members behind together form no quorum any more: both are told.
  const auto late2 = who(c.join("run-1", "late", 6));
  const auto late3 = who(c.join("run-1", "later", 6));
  c.request_quorum(late2, 40, 7);
  c.request_quorum(late3, 40, 7);
  c.tick(7);
  for (const auto& m : {late2, late3}) {
    const auto told = c.take_quorum(m);
    ASSERT_TRUE(told);
    EXPECT_TRUE(told->run_finished);
  }
  // A member that leaves without finishing (killed, preempted) changes nothing of the kind.
  Coordinator d = make(2);
  const auto [x, y] = quorum_of_two(d);
  const auto z = who(d.join("run-1", "z", 2));
  d.leave(x, "process ended", 3);
  d.request_quorum(z, 5, 4);
  d.tick(4);
  EXPECT_FALSE(d.take_quorum(z));
}

}  // namespace
}  // namespace loco::membership

namespace loco::membership {
namespace {

// A step no run reaches is refused and changes nothing: a member that claimed 2^63 - 1 once marked the run
// finished there (issue 35). A run id that is not a plain name is refused before anything is served.
TEST(Coordinator, StepsBeyondAnyRunAndOddRunIdsAreRefused) {
  Coordinator c = make();
  const auto [a, b] = quorum_of_two(c);
  expect_refusal([&] { c.request_quorum(a, std::numeric_limits<std::int64_t>::max(), 2); }, Refusal::malformed,
                 "which no run reaches");
  expect_refusal([&] { c.request_quorum(a, -1, 2); }, Refusal::malformed, "which no run reaches");
  expect_refusal([&] { c.vote(a, 1, kMaxStep + 1, true, "h", 2); }, Refusal::malformed, "which no run reaches");
  c.request_quorum(a, kMaxStep, 2);  // the bound itself is a step
  EXPECT_EQ(c.status(2).at("finished"), false);
  EXPECT_THROW(Coordinator(CoordinatorOptions{{1, 0, 3, 5}, "run\nloco coordinator: commit", 77, {}}), ConfigError);

  // Told the run's steps, the coordinator refuses any step beyond them.
  CoordinatorOptions bounded{{1, 0, 3, 5}, "run-1", 77, 3, {}, 100};
  Coordinator d(bounded);
  const auto [x, y] = quorum_of_two(d);
  expect_refusal([&] { d.request_quorum(x, 101, 2); }, Refusal::malformed, "which no member of this run reaches");
  expect_refusal([&] { d.vote(y, 1, 101, true, "h", 2); }, Refusal::malformed, "(0 to 100)");
  d.request_quorum(x, 100, 2);
  EXPECT_THROW(Coordinator(CoordinatorOptions{{1, 0, 3, 5}, "", 77, {}}), ConfigError);
  // A run id of 10,000 bytes is shown cut (before: echoed whole in the error line).
  try {
    Coordinator(CoordinatorOptions{{1, 0, 3, 5}, std::string(10000, 'r') + "!", 77, {}});
    ADD_FAILURE() << "a run id of 10,001 bytes was taken";
  } catch (const ConfigError& e) {
    EXPECT_LT(std::string(e.what()).size(), 400u) << e.what();
    EXPECT_NE(std::string(e.what()).find("(10001 bytes)"), std::string::npos) << e.what();
  }
}

// Members' metric points (the dashboard): kept by name with the coordinator's time of receipt, so that a
// restarted member (a new id) goes on with its curve; the member table shows each name's latest.
TEST(Coordinator, HeartbeatsKeepTheMembersMetricsByName) {
  Coordinator c = make();
  const auto a1 = who(c.join("run-1", "a", 0));
  c.heartbeat(a1, 2, {monitor::parse_report(nlohmann::json::parse(R"({"step": 10, "loss": 5.5})")),
                      monitor::parse_report(nlohmann::json::parse(R"({"step": 20, "loss": 5.25, "tokens_per_s": 900})"))});
  c.leave(a1, "restarted", 3);
  const auto a2 = who(c.join("run-1", "a", 4));
  c.heartbeat(a2, 5, {monitor::parse_report(nlohmann::json::parse(R"({"step": 30, "loss": 5.0})"))});
  const nlohmann::json history = c.history(0);
  ASSERT_EQ(history.at("series").size(), 1u);
  EXPECT_EQ(history["series"][0]["name"], "a");
  EXPECT_EQ(history["series"][0]["step"], nlohmann::json::parse("[10, 20, 30]"));
  EXPECT_EQ(history["series"][0]["time_s"], nlohmann::json::parse("[2.0, 2.0, 5.0]"));
  EXPECT_EQ(c.history(2).at("series")[0]["step"], nlohmann::json::parse("[30]"));
  const nlohmann::json member = c.status(6).at("members").at(0);
  EXPECT_EQ(member.at("id"), "a#2");
  EXPECT_EQ(member.at("name"), "a");
  EXPECT_EQ(member.at("metrics"), nlohmann::json::parse(R"({"step": 30, "loss": 5.0})"));
  EXPECT_TRUE(c.status(6).at("former_members").empty());
  c.leave(a2, "finished", 7, /*finished=*/true);
  EXPECT_EQ(c.status(8).at("former_members"),
            nlohmann::json::parse(R"([{"name": "a", "metrics": {"step": 30, "loss": 5.0}}])"));
}

}  // namespace
}  // namespace loco::membership
