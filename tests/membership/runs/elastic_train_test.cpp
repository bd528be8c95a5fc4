// Elastic runs whose members fail, join late and heal (the fixture: elastic_run.h). A member killed mid-run
// or inside the all-reduce (LOCO_FAULT) leaves the others to finish in a quorum of two; a member started late
// heals from a live one and finishes with them, also when its donor dies while sending (another donor takes
// over) or a chunk of the state is corrupted on its way (refused and sent again); a stopped member is fenced
// out, then rejoins and heals; `loco launch --elastic` restarts a killed rank, which heals; members whose
// names or settings differ from the run's are refused at their join. Elastic data parallel (a quorum and a
// vote every step) and NoLoCo (groups drawn from each quorum, no vote) go through a kill too. Every member
// that finishes ends with bit-identical global parameters (data parallel: bit-identical models; NoLoCo's
// replicas differ by design).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "loco/membership/authentication.h"
#include "membership/runs/elastic_run.h"

namespace loco {

namespace fs = std::filesystem;

// Three members; c fails with `fault`; a and b finish in a quorum of two without losing an outer step.
void ElasticTrain::survivors_finish(const std::string& run, const std::string& fault, const Checks& checks,
                                    int synchronisations, int steps) {
  const auto coordinator_process = coordinator(run, 3);
  auto a = member(run, "a", steps, "", checks.settings);
  auto b = member(run, "b", steps, "", checks.settings);
  auto c = member(run, "c", steps, fault, checks.settings);
  EXPECT_EQ(a->wait(180), 0) << a->output();
  EXPECT_EQ(b->wait(180), 0) << b->output();
  EXPECT_EQ(c->wait(30), 128 + 9) << c->output();
  // The quorums went from three members to two.
  EXPECT_NE(a->output().find("3 members"), std::string::npos) << a->output();
  EXPECT_NE(a->output().find("2 members (a#1, b#1)"), std::string::npos) << a->output();
  // Its metrics say so: the quorums it trained in, and the last line's membership.
  nlohmann::json last;
  const auto quorums = events(run, "a-1", "quorum", &last);
  ASSERT_GE(quorums.size(), 2u);
  EXPECT_EQ(quorums.back().at("detail").get<std::string>().find("2 members (a#1, b#1)"), 4u) << quorums.back();
  EXPECT_EQ(last.at("quorum_members"), 2) << last;
  EXPECT_EQ(last.at("member"), "a#1") << last;
  EXPECT_EQ(last.at(checks.counter), synchronisations) << last;  // none lost
  for (const std::string& tensor : checks.tensors) {
    const std::string ga = final_global(run, "a-1", steps, tensor), gb = final_global(run, "b-1", steps, tensor);
    EXPECT_FALSE(ga.empty());
    EXPECT_TRUE(ga == gb) << "the survivors' global parameters differ";
  }
}

// Killed mid-round: rounds end at steps 4, 8, 12, ...
TEST_F(ElasticTrain, SurvivorsFinishAfterAMemberIsKilled) { survivors_finish("kill", "10:KILL", Checks{}, 24 / 4); }

// Killed at its first outer exchange, while a and b are already inside the all-reduce with it: that
// outer step aborts and is retried by the two.
TEST_F(ElasticTrain, SurvivorsFinishAfterAMemberIsKilledInsideTheAllReduce) {
  survivors_finish("exchange", "exchanging:KILL", Checks{}, 24 / 4);
}

// Data parallel, a quorum and a vote every step: c is killed inside its first gradient exchange, the two
// others retry that step without it and commit all 24.
TEST_F(ElasticTrain, DataParallelSurvivorsFinishAfterAMemberIsKilledInsideTheAllReduce) {
  survivors_finish("ddp-exchange", "exchanging:KILL", data_parallel(), 24);
}

// Killed between two steps: the survivors' next quorum leaves it out.
TEST_F(ElasticTrain, DataParallelSurvivorsFinishAfterAMemberIsKilled) {
  survivors_finish("ddp-kill", "10:KILL", data_parallel(), 24);
}

// NoLoCo: three members average as one group of three; c is killed inside its first exchange, so a and b
// skip that round (nothing applied) and average as a pair in the 5 others.
TEST_F(ElasticTrain, NolocoMembersSkipTheRoundOfAMemberKilledInsideTheExchange) {
  survivors_finish("noloco-exchange", "exchanging:KILL", noloco(), 24 / 4 - 1);
  for (const std::string m : {"a-1", "b-1"}) EXPECT_EQ(events("noloco-exchange", m, "skip").size(), 1u) << m;
}

// a and b train; c starts once they are at step 12 and heals at their next synchronisation. a, the first
// donor (the lowest-ranked up-to-date member), gets `a_fault` as LOCO_FAULT.
ElasticTrain::LateJoin ElasticTrain::late_member_joins(const std::string& run, const std::string& a_fault) {
  LateJoin members;
  members.coordinator = coordinator(run, 2);
  members.a = member(run, "a", kLateJoinSteps, a_fault);
  members.b = member(run, "b", kLateJoinSteps);
  EXPECT_TRUE(members.a->wait_for(std::regex("step 12/400"), 120)) << members.a->output();
  members.c = member(run, "c", kLateJoinSteps);
  return members;
}

TEST_F(ElasticTrain, ALateMemberHealsAndFinishesWithTheOthers) {
  const LateJoin run = late_member_joins("join", "");
  for (auto* m : {run.a.get(), run.b.get(), run.c.get()}) EXPECT_EQ(m->wait(300), 0) << m->output();
  EXPECT_NE(run.c->output().find("healed from a#1"), std::string::npos) << run.c->output();
  EXPECT_NE(run.a->output().find("3 members (a#1, b#1, c#1)"), std::string::npos) << run.a->output();
  const auto heals = events("join", "c-1", "heal");
  ASSERT_EQ(heals.size(), 1u);
  EXPECT_TRUE(std::regex_search(heals[0].at("detail").get<std::string>(), std::regex("^from a#1, .* MB, step 0 -> ")))
      << heals[0];
  const std::string ga = final_global("join", "a-1", kLateJoinSteps);
  EXPECT_FALSE(ga.empty());
  EXPECT_TRUE(ga == final_global("join", "b-1", kLateJoinSteps)) << "a's and b's global parameters differ";
  EXPECT_TRUE(ga == final_global("join", "c-1", kLateJoinSteps)) << "a's and c's global parameters differ";
}

// The donor dies while it sends its state: the next quorum has another donor, and the joiner heals from it.
TEST_F(ElasticTrain, WhenTheDonorDiesTheJoinerHealsFromAnother) {
  const LateJoin run = late_member_joins("donor", "donating:KILL");
  EXPECT_EQ(run.a->wait(300), 128 + 9) << run.a->output();
  for (auto* m : {run.b.get(), run.c.get()}) EXPECT_EQ(m->wait(300), 0) << m->output();
  EXPECT_NE(run.c->output().find("healed from b#1"), std::string::npos) << run.c->output();
  EXPECT_EQ(run.c->output().find("healed from a#1"), std::string::npos) << run.c->output();
  EXPECT_EQ(events("donor", "c-1", "heal").size(), 1u);
  EXPECT_NE(run.b->output().find("2 members (b#1, c#1)"), std::string::npos) << run.b->output();
  const std::string gb = final_global("donor", "b-1", kLateJoinSteps);
  EXPECT_FALSE(gb.empty());
  EXPECT_TRUE(gb == final_global("donor", "c-1", kLateJoinSteps)) << "b's and c's global parameters differ";
}

// The joiner dies as it starts receiving the state: the donor and the up-to-date member (which took no part
// in the transfer) fail their synchronisation alike, go on together in a quorum of two, and lose nothing.
TEST_F(ElasticTrain, WhenTheJoinerDiesWhileHealingTheOthersGoOnTogether) {
  const auto coordinator_process = coordinator("receiver", 2);
  auto a = member("receiver", "a", kLateJoinSteps);
  auto b = member("receiver", "b", kLateJoinSteps);
  ASSERT_TRUE(a->wait_for(std::regex("step 12/400"), 120)) << a->output();
  auto c = member("receiver", "c", kLateJoinSteps, "receiving:KILL");
  EXPECT_EQ(c->wait(120), 128 + 9) << c->output();
  for (auto* m : {a.get(), b.get()}) EXPECT_EQ(m->wait(300), 0) << m->output();
  EXPECT_NE(a->output().find("3 members (a#1, b#1, c#1)"), std::string::npos) << a->output();
  nlohmann::json last;
  const auto quorums = events("receiver", "b-1", "quorum", &last);
  ASSERT_FALSE(quorums.empty());
  EXPECT_EQ(quorums.back().at("detail").get<std::string>().find("2 members (a#1, b#1)"), 4u) << quorums.back();
  EXPECT_EQ(last.at("outer_steps"), kLateJoinSteps / 4) << last;  // none lost
  const std::string ga = final_global("receiver", "a-1", kLateJoinSteps);
  EXPECT_FALSE(ga.empty());
  EXPECT_TRUE(ga == final_global("receiver", "b-1", kLateJoinSteps)) << "a's and b's global parameters differ";
}

// A chunk of the state leaves the donor with a byte flipped: the receiver refuses it (SHA-256), the donor
// sends that chunk again, and the joiner heals once, from the intact bytes. The state goes to the joiner
// alone: b, up to date, neither receives nor checks it.
TEST_F(ElasticTrain, ACorruptedStateChunkIsRefusedAndSentAgain) {
  const LateJoin run = late_member_joins("corrupt", "donating:CORRUPT");
  for (auto* m : {run.a.get(), run.b.get(), run.c.get()}) EXPECT_EQ(m->wait(300), 0) << m->output();
  EXPECT_NE(run.c->output().find("elastic: chunk 1 of 1 (bytes 0.."), std::string::npos) << run.c->output();
  EXPECT_NE(run.c->output().find("of the state from a#1 does not match its SHA-256; refused, asking for it again "
                                 "(try 2 of 3)"),
            std::string::npos)
      << run.c->output();
  EXPECT_NE(run.a->output().find("elastic: 1 member(s) refused chunk 1 of 1"), std::string::npos) << run.a->output();
  EXPECT_EQ(run.b->output().find("does not match its SHA-256"), std::string::npos) << run.b->output();
  EXPECT_EQ(events("corrupt", "c-1", "heal").size(), 1u);
  const std::string ga = final_global("corrupt", "a-1", kLateJoinSteps);
  EXPECT_FALSE(ga.empty());
  EXPECT_TRUE(ga == final_global("corrupt", "b-1", kLateJoinSteps)) << "a's and b's global parameters differ";
  EXPECT_TRUE(ga == final_global("corrupt", "c-1", kLateJoinSteps)) << "a's and c's global parameters differ";
}

// A member that arrives after the others finished the run is told so and stops cleanly (exit 0) instead
// of waiting comm.timeout_s for a quorum that cannot form.
TEST_F(ElasticTrain, AMemberThatArrivesAfterTheRunFinishedStops) {
  const auto coordinator_process = coordinator("over", 2);
  auto a = member("over", "a", 24);
  auto b = member("over", "b", 24);
  EXPECT_EQ(a->wait(180), 0) << a->output();
  EXPECT_EQ(b->wait(180), 0) << b->output();
  auto c = member("over", "c", 24);
  EXPECT_EQ(c->wait(30), 0) << c->output();
  EXPECT_NE(c->output().find("member c#1 stops: the run was finished at step 24 by other members"),
            std::string::npos) << c->output();
}

// A LOCO_MEMBER_NAME that is no member name (a space, a '/', over 64 characters) is refused at start-up, naming
// the rule, instead of being rewritten silently into a name the user never gave (and then finding no earlier
// process's checkpoints, and no LOCO_FAULT, under the name they gave).
TEST_F(ElasticTrain, AMemberNameThatIsNoPlainNameIsRefused) {
  address_ = "127.0.0.1:1";  // never reached
  for (const std::string& name : {std::string("rank 1"), std::string("a/b"), std::string(65, 'n')}) {
    auto a = member("badname", name, 24);
    EXPECT_EQ(a->wait(30), 2) << a->output();
    EXPECT_NE(a->output().find("LOCO_MEMBER_NAME '" + name + "' is not a member name: give 1 to 64 letters, digits"),
              std::string::npos)
        << a->output();
  }
  EXPECT_FALSE(fs::exists(*dir_ / "badname"));
}

// A member that hangs (SIGSTOP) is expired and the others go on; continued, it finds itself fenced out,
// rejoins as a new member, heals from the others at its next synchronisation and finishes with them.
TEST_F(ElasticTrain, AStoppedMemberIsFencedOutThenRejoinsAndHeals) {
  const auto coordinator_process = coordinator("stop", 3);
  constexpr int kSteps = 2400;  // a and b run for many seconds after c is expired
  auto a = member("stop", "a", kSteps);
  auto b = member("stop", "b", kSteps);
  const auto c_started = std::chrono::steady_clock::now();
  auto c = member("stop", "c", kSteps, "10:STOP");
  ASSERT_TRUE(a->wait_for(std::regex("2 members \\(a#1, b#1\\)"), 120)) << a->output();
  // Continued only once the coordinator expired it (a quorum may leave it out earlier, at a join window).
  httplib::Client status("127.0.0.1", std::stoi(address_.substr(address_.rfind(':') + 1)));
  const auto started = std::chrono::steady_clock::now();
  bool expired = false;
  while (!expired && std::chrono::steady_clock::now() - started < std::chrono::seconds(60)) {
    const auto reply = status.Get("/status", {{membership::kStatusTokenHeader, membership::status_token(secret_, "stop")}});
    expired = reply && reply->body.find("\"c#1\"") == std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(expired) << "the stopped member was not expired";
  c->signal(SIGCONT);
  for (auto* m : {a.get(), b.get(), c.get()}) EXPECT_EQ(m->wait(300), 0) << m->output();
  const double c_lived_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c_started).count();
  EXPECT_NE(c->output().find("rejoined as c#2"), std::string::npos) << c->output();
  // Its clock after the heal is the donor's (started with it, and set up longer): not more than c lived (audit round
  // 13: the donor's time was added to all of c's own, and every heal mid-run added c's run time once more).
  const auto c_lines = test::read_metrics(*dir_ / "stop" / "members" / "c-1");
  ASSERT_FALSE(c_lines.empty());
  EXPECT_LE(c_lines.back().at("elapsed_s").get<double>(), c_lived_s);
  const auto rejoins = events("stop", "c-1", "rejoin");
  ASSERT_EQ(rejoins.size(), 1u);
  EXPECT_EQ(rejoins[0].at("detail"), "c#1 -> c#2");
  EXPECT_EQ(events("stop", "c-1", "heal").size(), 1u);
  EXPECT_TRUE(std::regex_search(c->output(), std::regex("healed from (a|b)#1"))) << c->output();
  EXPECT_NE(a->output().find("3 members (a#1, b#1, c#2)"), std::string::npos) << a->output();
  const std::string ga = final_global("stop", "a-1", kSteps);
  EXPECT_FALSE(ga.empty());
  EXPECT_TRUE(ga == final_global("stop", "b-1", kSteps)) << "a's and b's global parameters differ";
  EXPECT_TRUE(ga == final_global("stop", "c-1", kSteps)) << "a's and c's global parameters differ";
}

// Note "member-settings": a is given train.steps = 400, b 12. b, joining while a is a member, is refused at
// once, naming the key, and a trains its steps alone (before: b finished at 12 while a trained on, and a was
// told that the run was over, or stopped at its next synchronisation; the coordinator's check of a finish
// claim, note "finish-claims", still guards a member that claims one without such settings). b starts once a
// has joined: started together, b could finish before a joined a run without members, and nothing differed.
TEST_F(ElasticTrain, AMemberGivenOtherStepsThanTheOthersIsRefusedAtItsJoin) {
  const auto coordinator_process = coordinator("steps", 1, 0, 0, /*min_replicas=*/1);
  auto a = member("steps", "a", 400);
  ASSERT_TRUE(a->wait_for(std::regex("member a#1 of elastic run"), 60)) << a->output();
  auto b = member("steps", "b", 12);
  EXPECT_EQ(b->wait(120), 1) << b->output();
  EXPECT_NE(b->output().find("member 'b' has train.steps = 12, but the run's members have 400"), std::string::npos)
      << b->output();
  EXPECT_EQ(a->wait(120), 0) << a->output();
  EXPECT_FALSE(final_global("steps", "a-1", 400).empty()) << a->output();
}

// `loco launch --elastic` serves the coordinator, tells it at once when a rank dies, and starts the rank
// again as a new member, which heals and finishes with the others.
TEST_F(ElasticTrain, LaunchRestartsAKilledRankAsANewMember) {
  constexpr int kSteps = 200;
  const std::string out = launched("launch", 3, 1, "rank-2@10:KILL", kSteps);
  EXPECT_NE(out.find("rank 2 was killed by SIGKILL; starting it again as a new member (restart 1 of 1)"),
            std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\[rank 2\] elastic: healed from rank-[01]#1)"))) << out;
  const std::string g0 = final_global("launch", "rank-0-1", kSteps);
  EXPECT_FALSE(g0.empty());
  EXPECT_TRUE(g0 == final_global("launch", "rank-1-1", kSteps)) << "ranks 0 and 1 differ";
  EXPECT_TRUE(g0 == final_global("launch", "rank-2-2", kSteps)) << "rank 0 and the restarted rank 2 differ";
}

}  // namespace loco
