// Elastic runs stopped and started again (the fixture: elastic_run.h): a signalled member leaves with a
// checkpoint, also while it waits for a quorum or to join; members give up with a checkpoint when their
// coordinator is gone; members resumed from their checkpoints (all, or some, or on either side of a
// synchronisation) go on as the uninterrupted run did; the run survives a restart of its coordinator; members
// started again without their checkpoints do not train the run from the start.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "loco/membership/authentication.h"
#include "membership/runs/elastic_run.h"

namespace loco {

namespace fs = std::filesystem;

// Note "graceful-stop" for a member: SIGTERM (its spot instance is about to go) stops it after its current
// step with a checkpoint, and it leaves the run at once, so the coordinator records a leave, not an expiry
// a heartbeat timeout later; the others go on without it and finish.
TEST_F(ElasticTrain, ASignalledMemberLeavesWithACheckpointAndTheOthersGoOn) {
  const auto coordinator_process = coordinator("sigterm", 3);
  constexpr int kSteps = 400;
  auto a = member("sigterm", "a", kSteps);
  auto b = member("sigterm", "b", kSteps);
  auto c = member("sigterm", "c", kSteps);
  ASSERT_TRUE(c->wait_for(std::regex("step 12/400"), 120)) << c->output();
  c->signal(SIGTERM);
  EXPECT_EQ(c->wait(60), 128 + SIGTERM) << c->output();
  std::smatch said;
  const std::string c_output = c->output();
  ASSERT_TRUE(
      std::regex_search(c_output, said, std::regex("member c#1 left the run after step (\\d+): stopped by SIGTERM")))
      << c_output;
  const int step = std::stoi(said[1]);
  EXPECT_GE(step, 12);
  EXPECT_LT(step, kSteps);
  EXPECT_TRUE(fs::exists(*dir_ / "sigterm" / "members" / "c-1" / "checkpoints" / ("step_" + std::to_string(step)) /
                         "state.json"))
      << c_output;
  for (auto* m : {a.get(), b.get()}) EXPECT_EQ(m->wait(180), 0) << m->output();
  EXPECT_NE(a->output().find("2 members (a#1, b#1)"), std::string::npos) << a->output();
  const std::string log = coordinator_process->output();
  EXPECT_NE(log.find("leave c#1 (stopped by SIGTERM)"), std::string::npos) << log;
  EXPECT_EQ(log.find("expire c#1"), std::string::npos) << log;
}

// A member waiting for a quorum that cannot form (the only other member was killed after step 10; two are
// needed) stops at once when signalled, not after comm.timeout_s (60 s here), and leaves with a checkpoint:
// DiLoCo's of step 12, whose synchronisation is still to do; data parallel's of step 10 (step 11 waited for
// its quorum before its update). Resumed from that checkpoint with a new member beside it, it synchronises
// first (the new member heals from it) and both finish alike, every synchronisation counted once.
void ElasticTrain::stops_while_waiting(const std::string& run, const Checks& checks, int stopped_after,
                                       int synchronisations) {
  constexpr int kSteps = 24;
  fs::path checkpoint;
  {
    const auto coordinator_process = coordinator(run, 2);
    auto a = member(run, "a", kSteps, "", checks.settings);
    auto b = member(run, "b", kSteps, "10:KILL", checks.settings);
    EXPECT_EQ(b->wait(120), 128 + SIGKILL) << b->output();
    ASSERT_TRUE(coordinator_process->wait_for(std::regex("expire b#1"), 30)) << coordinator_process->output();
    std::this_thread::sleep_for(std::chrono::seconds(2));  // a is at its next synchronisation by now, waiting
    const auto signalled = std::chrono::steady_clock::now();
    a->signal(SIGTERM);
    EXPECT_EQ(a->wait(60), 128 + SIGTERM) << a->output();
    EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(20)) << a->output();
    const std::string said = a->output();
    EXPECT_NE(said.find("elastic member a#1: stopped by SIGTERM while waiting for a quorum"), std::string::npos)
        << said;
    EXPECT_NE(said.find(fmt::format("member a#1 left the run after step {}: stopped by SIGTERM", stopped_after)),
              std::string::npos)
        << said;
    checkpoint = *dir_ / run / "members" / "a-1" / "checkpoints" / fmt::format("step_{}", stopped_after);
    ASSERT_TRUE(fs::exists(checkpoint / "state.json")) << said;

    EXPECT_NE(coordinator_process->output().find("leave a#1 (stopped by SIGTERM)"), std::string::npos)
        << coordinator_process->output();
  }
  const std::string resumed = run + "-resumed";
  const auto coordinator_process = coordinator(resumed, 2);
  auto a = member(resumed, "a", kSteps, "", checks.settings, {"--resume", checkpoint.string()});
  auto c = member(resumed, "c", kSteps, "", checks.settings);
  for (auto* m : {a.get(), c.get()}) EXPECT_EQ(m->wait(180), 0) << m->output();
  EXPECT_NE(a->output().find(fmt::format("resuming after step {}", stopped_after)), std::string::npos) << a->output();
  EXPECT_NE(c->output().find("healed from a#1, "), std::string::npos) << c->output();
  for (const std::string& tensor : checks.tensors) {
    const std::string ga = final_global(resumed, "a-1", kSteps, tensor);
    EXPECT_FALSE(ga.empty());
    EXPECT_TRUE(ga == final_global(resumed, "c-1", kSteps, tensor)) << "a's and c's global parameters differ";
  }
  nlohmann::json last;
  events(resumed, "a-1", "quorum", &last);
  EXPECT_EQ(last.at(checks.counter), synchronisations) << last;
}

TEST_F(ElasticTrain, AMemberWaitingForAQuorumStopsWhenSignalled) {
  stops_while_waiting("waitstop", Checks{}, 12, 24 / 4);
}

TEST_F(ElasticTrain, ADataParallelMemberWaitingForAQuorumStopsWhenSignalled) {
  stops_while_waiting("ddp-waitstop", data_parallel(), 10, 24);
  // Its data position is that of the 10 steps taken: each step is a round of the elastic layout, 2 members x
  // batch_size 2 windows (note "elastic-data"), so the next round starts at window 40. Step 11 read windows
  // 40-41 before its update waited for the quorum; the member puts its sampler back, or the resumed run would
  // skip them (42).
  const nlohmann::json state = nlohmann::json::parse(
      test::read_text(*dir_ / "ddp-waitstop" / "members" / "a-1" / "checkpoints" / "step_10" / "state.json"));
  EXPECT_EQ(state.at("sampler").at("epoch"), 0) << state.dump();
  EXPECT_EQ(state.at("sampler").at("cursor"), 40) << state.dump();
}

// A member whose coordinator does not answer (not started yet) keeps trying to join for a minute; signalled,
// it stops at once, having written nothing.
TEST_F(ElasticTrain, AMemberWaitingToJoinStopsWhenSignalled) {
  address_ = "127.0.0.1:1";  // nothing listens there: each try is refused at once
  auto a = member("nojoin", "a", 24);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // started and trying to join
  a->signal(SIGTERM);
  EXPECT_EQ(a->wait(20), 128 + SIGTERM) << a->output();
  EXPECT_NE(a->output().find("stopped by SIGTERM while waiting for its coordinator to answer its join; nothing was "
                             "trained or written"),
            std::string::npos)
      << a->output();
  EXPECT_FALSE(fs::exists(*dir_ / "nojoin")) << a->output();
}

// The same for members as threads of one process (dist.backend = local): each stops after its current step
// with its checkpoint and leaves; the process says so and exits with 128 + the signal.
TEST_F(ElasticTrain, MembersAsThreadsEachStopWithACheckpoint) {
  const fs::path run = *dir_ / "threads-sigint", members = run / "members";
  const pid_t pid = test::start_loco(
      {"train", "--config", config().string(), "--set", "dist.backend=local", "--set", "dist.replicas=2", "--set",
       "train.steps=100000", "--set", "train.log_every=1", "--set", "train.out_dir=" + run.string()},
      *dir_ / "threads-sigint.out", *dir_ / "threads-sigint.err");
  const bool started = test::eventually([&] { return test::read_metrics(members / "replica-0-1").size() >= 3; },
                                        std::chrono::seconds(60));
  ::kill(pid, SIGINT);
  const int status = test::wait_exit(pid, std::chrono::seconds(60));
  const std::string said =
      test::read_text(*dir_ / "threads-sigint.out") + test::read_text(*dir_ / "threads-sigint.err");
  EXPECT_EQ(status, 128 + SIGINT) << said;
  ASSERT_TRUE(started) << said;
  EXPECT_NE(said.find("stopped by SIGINT after step"), std::string::npos) << said;
  for (const std::string member : {"replica-0", "replica-1"}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        said, m, std::regex("member " + member + "#1 left the run after step (\\d+): stopped by SIGINT")))
        << said;
    EXPECT_TRUE(fs::exists(members / (member + "-1") / "checkpoints" / ("step_" + m[1].str()) / "state.json")) << said;
  }
}

// Note "sync-progress" (membership/heal_rules.h). a stops while it waits for a quorum at step 28 (b, stopped
// by its fault, still counts as healthy), so a's checkpoint of step 28 holds that synchronisation still to do;
// b then synchronises step 28 alone. Resumed together from their checkpoints of step 28, a adopts b's state
// and both take the same branch (before: a waited in the exchange until comm.timeout_s while b trained on, and
// one of them failed).
TEST_F(ElasticTrain, MembersResumedOnEitherSideOfASynchronisationAgree) {
  constexpr int kSteps = 32;
  const std::vector<std::string> settings = {"train.checkpoint_every=4", "comm.timeout_s=20"};
  {
    const auto c = coordinator("sides", 2, 0, 0, /*min_replicas=*/1, "", /*heartbeat_timeout_s=*/"30");
    auto a = member("sides", "a", kSteps, "", settings);
    auto b = member("sides", "b", kSteps, "26:STOP", settings);
    httplib::Client status("127.0.0.1", std::stoi(address_.substr(address_.rfind(':') + 1)));
    const auto started = std::chrono::steady_clock::now();
    bool waiting = false;
    std::string last_status;
    while (!waiting && std::chrono::steady_clock::now() - started < std::chrono::seconds(60)) {
      const auto reply =
          status.Get("/status", {{membership::kStatusTokenHeader, membership::status_token(secret_, "sides")}});
      if (reply) last_status = reply->body;
      if (reply && reply->status == 200) {
        const auto parsed = nlohmann::json::parse(reply->body);  // kept: the loop reads into it
        for (const auto& m : parsed.at("members")) {
          waiting = waiting || (m.at("id") == "a#1" && m.at("step") == 28 && !m.at("waiting_s").is_null());
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(waiting) << last_status.substr(0, 3000) << a->output();
    a->signal(SIGTERM);
    EXPECT_EQ(a->wait(60), 128 + SIGTERM) << a->output();
    b->signal(SIGCONT);
    EXPECT_EQ(b->wait(120), 0) << b->output();
  }
  const auto outer = [&](const std::string& member) {
    const auto state = nlohmann::json::parse(
        test::read_text(*dir_ / "sides" / "members" / member / "checkpoints" / "step_28" / "state.json"));
    return state.at("strategy");
  };
  ASSERT_EQ(outer("a-1").at("last_point"), 24) << outer("a-1");  // a's synchronisation of step 28 still to do
  ASSERT_EQ(outer("b-1").at("last_point"), 28) << outer("b-1");  // b's done
  const auto resume = [&](const std::string& member) {
    return std::vector<std::string>{"--resume",
                                    (*dir_ / "sides" / "members" / member / "checkpoints" / "step_28").string(),
                                    "--set", "train.out_dir=" + (*dir_ / "sides-resumed").string()};
  };
  const auto c = coordinator("sides-resumed", 2);
  auto a = member("sides-resumed", "a", kSteps, "", settings, resume("a-1"));
  auto b = member("sides-resumed", "b", kSteps, "", settings, resume("b-1"));
  const auto begun = std::chrono::steady_clock::now();
  EXPECT_EQ(a->wait(120), 0) << a->output();
  EXPECT_EQ(b->wait(120), 0) << b->output();
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(20)) << "a member waited for a timeout";
  EXPECT_TRUE(std::regex_search(a->output(), std::regex("healed from b#1"))) << a->output();
  EXPECT_EQ(b->output().find("healed"), std::string::npos) << b->output();
  EXPECT_EQ(a->output().find("failed"), std::string::npos) << a->output();
  const std::string ga = final_global("sides-resumed", "a-1", kSteps);
  EXPECT_FALSE(ga.empty());
  EXPECT_TRUE(ga == final_global("sides-resumed", "b-1", kSteps)) << "a's and b's global parameters differ";
}

// Note "member-settings": a member resumed from its checkpoint alone (`loco train --resume`, the config its
// checkpoint holds: model.vocab_size resolved from the data) joins members started from the config file
// (model.vocab_size = 0: the data's). Before, the coordinator refused it for a vocabulary of 258 against 0.
TEST_F(ElasticTrain, AMemberResumedFromItsCheckpointAloneJoinsMembersStartedFromTheConfig) {
  {
    const auto c = coordinator("bare-first", 1, 0, 0, /*min_replicas=*/1);
    auto a = member("bare-first", "a", 8, "", {"train.checkpoint_every=4"});
    ASSERT_EQ(a->wait(120), 0) << a->output();
  }
  const auto c = coordinator("bare", 2);
  auto b = member("bare", "b", 12);
  test::ChildProcess a(
      {"/usr/bin/env", "LOCO_COORDINATOR=" + address_, "LOCO_RUN_ID=bare", "LOCO_MEMBER_NAME=a", LOCO_BINARY, "train",
       "--resume", (*dir_ / "bare-first" / "members" / "a-1" / "checkpoints" / "step_8").string(), "--set",
       "train.out_dir=" + (*dir_ / "bare").string(), "--set", "train.steps=12", "--set", "comm.timeout_s=60"});
  EXPECT_EQ(a.wait(120), 0) << a.output();
  EXPECT_EQ(b->wait(120), 0) << b->output();
  EXPECT_EQ(a.output().find("has model.vocab_size"), std::string::npos) << a.output();
}

// The coordinator is killed mid-run and a replacement started on the same ports: the members keep
// training meanwhile, rejoin the new incarnation and finish together with the same global parameters.
TEST_F(ElasticTrain, TheRunSurvivesARestartOfItsCoordinator) {
  auto first = coordinator("restart", 3);
  const std::string address = address_;
  const int port = std::stoi(address.substr(address.rfind(':') + 1)), store_port = store_port_;
  constexpr int kSteps = 400;
  auto a = member("restart", "a", kSteps);
  auto b = member("restart", "b", kSteps);
  auto c = member("restart", "c", kSteps);
  ASSERT_TRUE(a->wait_for(std::regex("step 20/400"), 120)) << a->output();
  first->signal(SIGKILL);
  EXPECT_EQ(first->wait(10), 128 + SIGKILL);
  const auto second = coordinator("restart", 3, port, store_port);
  ASSERT_EQ(address_, address) << second->output();
  for (auto* m : {a.get(), b.get(), c.get()}) EXPECT_EQ(m->wait(300), 0) << m->output();
  for (auto* m : {a.get(), b.get(), c.get()}) {
    EXPECT_TRUE(std::regex_search(m->output(), std::regex("rejoined as [abc]#1"))) << m->output();
  }
  // The replacement committed outer steps of its own.
  httplib::Client status("127.0.0.1", port);
  const auto metrics = status.Get("/metrics");
  ASSERT_TRUE(metrics) << second->output();
  std::smatch commits;
  ASSERT_TRUE(std::regex_search(metrics->body, commits,
                                std::regex(R"(loco_membership_events_total\{kind="commit"\} ([0-9]+))")))
      << metrics->body;
  EXPECT_GT(std::stoi(commits[1]), 0) << metrics->body;
  const std::string ga = final_global("restart", "a-1", kSteps);
  EXPECT_FALSE(ga.empty());
  EXPECT_TRUE(ga == final_global("restart", "b-1", kSteps)) << "a's and b's global parameters differ";
  EXPECT_TRUE(ga == final_global("restart", "c-1", kSteps)) << "a's and c's global parameters differ";
}

// Note "no-fresh-restart" (membership/coordinator.cpp): every member is killed, and the same commands are
// started again without --resume. They must not train the run again from step 0: they wait, and give up after
// comm.timeout_s saying what to do.
TEST_F(ElasticTrain, MembersStartedAgainWithoutTheirCheckpointsDoNotTrainTheRunFromTheStart) {
  const auto coordinator_process = coordinator("fresh", 2);
  auto a = member("fresh", "a", 400);
  auto b = member("fresh", "b", 400);
  ASSERT_TRUE(a->wait_for(std::regex("step 12/400"), 120)) << a->output();
  a->signal(SIGKILL);
  b->signal(SIGKILL);
  EXPECT_EQ(a->wait(10), 128 + SIGKILL);
  EXPECT_EQ(b->wait(10), 128 + SIGKILL);
  auto a2 = member("fresh", "a", 400, "", {"comm.timeout_s=15"});
  auto b2 = member("fresh", "b", 400, "", {"comm.timeout_s=15"});
  // Meanwhile `loco status` says why they wait, and how far the run got.
  std::string status;
  for (int tries = 0; tries < 40 && status.find("waiting for a member that holds") == std::string::npos; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    status = test::run_loco({"status", "--coordinator", address_}).output;
  }
  EXPECT_NE(status.find("waiting for a member that holds the run's progress: the run reached step "), std::string::npos)
      << status;
  EXPECT_FALSE(std::regex_search(status, std::regex("furthest step 0,"))) << status;
  for (auto* m : {a2.get(), b2.get()}) {
    EXPECT_EQ(m->wait(90), 1) << m->output();
    EXPECT_TRUE(
        std::regex_search(m->output(), std::regex("no quorum within 15.0 s; still waiting for a member that "
                                                  "holds the run's progress: the run reached step [1-9][0-9]* "
                                                  "with this coordinator, but the [12] waiting replicas? (is|are) "
                                                  "at step 0, started without a checkpoint. Start each with "
                                                  "--resume")))
        << m->output();
    EXPECT_FALSE(std::regex_search(m->output(), std::regex("step [0-9]+/400"))) << m->output();  // nothing trained
  }
}

// Audit round 12 (note "gave-up-waiting", util/stop_requested.h): members whose coordinator is gone for good give
// up their wait for a quorum after comm.timeout_s, each with a checkpoint of where it stands first (before: without
// train.checkpoint_every every step was lost, while a SIGTERM in the same wait kept them). The coordinator goes
// mid-round (a round of 1000 steps), so that no vote is under way.
TEST_F(ElasticTrain, MembersThatGiveUpWaitingForAQuorumCheckpointFirst) {
  auto gone = coordinator("gave-up", 2);
  const std::vector<std::string> settings = {"comm.timeout_s=8", "diloco.sync_every=1000"};
  auto a = member("gave-up", "a", 4000, "", settings);
  auto b = member("gave-up", "b", 4000, "", settings);
  ASSERT_TRUE(a->wait_for(std::regex("step 12/4000"), 120)) << a->output();
  gone->signal(SIGKILL);
  EXPECT_EQ(gone->wait(10), 128 + SIGKILL);
  for (auto* m : {a.get(), b.get()}) {
    EXPECT_EQ(m->wait(180), 1) << m->output();
    const std::string output = m->output();
    std::smatch written;
    ASSERT_TRUE(std::regex_search(output, written,
                                  std::regex("no quorum within 8.0 s; still waiting for the coordinator, which does "
                                             "not answer \\(.*\\)\\. It wrote a checkpoint of step 1000 first: "
                                             "resume it from (\\S+) once what it waited for is back")))
        << m->output();
    EXPECT_TRUE(fs::exists(fs::path(written[1].str()) / "state.json")) << written[1];
  }
}

// The same when the coordinator goes while the members exchange: their votes get no decision, nothing is
// applied, and they checkpoint the step they synchronise at before they give up (before: the vote's error ended
// them without a checkpoint). b stops itself at its first exchange (a is in the all-reduce already); the
// coordinator is killed meanwhile, then b goes on, so both vote to a coordinator that is gone.
TEST_F(ElasticTrain, MembersWhoseVoteGetsNoDecisionCheckpointFirst) {
  auto gone = coordinator("no-decision", 2);
  const std::vector<std::string> settings = {"comm.timeout_s=8", "diloco.sync_every=4"};
  auto a = member("no-decision", "a", 400, "", settings);
  auto b = member("no-decision", "b", 400, "b@exchanging:STOP", settings);
  const auto stopped = [&] {
    std::ifstream stat("/proc/" + std::to_string(b->pid()) + "/stat");
    const std::string line((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t name_end = line.rfind(')');
    return name_end != std::string::npos && line.size() > name_end + 2 && line[name_end + 2] == 'T';
  };
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!stopped() && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(stopped()) << b->output();
  gone->signal(SIGKILL);
  EXPECT_EQ(gone->wait(10), 128 + SIGKILL);
  b->signal(SIGCONT);
  for (auto* m : {a.get(), b.get()}) {
    EXPECT_EQ(m->wait(180), 1) << m->output();
    const std::string output = m->output();
    EXPECT_NE(output.find("no decision for the synchronisation at step 4"), std::string::npos) << output;
    std::smatch written;
    ASSERT_TRUE(std::regex_search(output, written,
                                  std::regex("It wrote a checkpoint of step 4 first: resume it from (\\S+) once "
                                             "what it waited for is back")))
        << output;
    EXPECT_TRUE(fs::exists(fs::path(written[1].str()) / "state.json")) << written[1];
  }
}

// Audit round 12 (note "stood-still", member_client.cpp): a member stopped (SIGSTOP: a suspended VM, a sleeping
// laptop) for longer than its comm.timeout_s while it waits for the run's first quorum waits a whole timeout again
// once continued, and trains with the member that comes then (before: it gave up on waking, "still waiting for no
// answer from the coordinator").
TEST_F(ElasticTrain, AMemberThatStoodStillLongerThanItsTimeoutGoesOnWaiting) {
  const auto coordinator_process = coordinator("stood-still", /*start_replicas=*/2, 0, 0, /*min_replicas=*/1);
  auto b = member("stood-still", "b", 24, "", {"comm.timeout_s=12"});
  ASSERT_TRUE(b->wait_for(std::regex("member b#1 of elastic run"), 60)) << b->output();
  std::this_thread::sleep_for(std::chrono::seconds(6));  // set up, and inside its wait for the first quorum
  b->signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(20));  // past its deadline, with nobody to form a quorum with
  b->signal(SIGCONT);
  auto a = member("stood-still", "a", 24);
  EXPECT_EQ(b->wait(120), 0) << b->output();
  EXPECT_EQ(a->wait(120), 0) << a->output();
  EXPECT_TRUE(std::regex_search(b->output(), std::regex("membership: b#[0-9]+ stood still for [0-9]+ s")))
      << b->output();
}

// Note "elastic-resume": a run whose members all stopped goes on from their checkpoints. Three members train
// 24 steps with a checkpoint at step 12; three new processes resume from those step-12 checkpoints, each from
// its own, and end with the global parameters of the uninterrupted run to the last bit (a spurious outer
// step at the resume, or a data round laid out anew, would change them). Then only a resumes and b and c
// start afresh: they heal from it at step 12 and the three finish together, every outer step counted once.
void ElasticTrain::resumes_from_members_checkpoints(const std::string& run, const std::vector<std::string>& algorithm) {
  constexpr int kSteps = 24;
  std::vector<std::string> settings = algorithm;
  settings.push_back("train.checkpoint_every=12");
  const auto resume_from = [&](const std::string& m) {
    return std::vector<std::string>{
        "--resume", (*dir_ / (run + "-full") / "members" / (m + "-1") / "checkpoints" / "step_12").string()};
  };
  {
    const auto coordinator_process = coordinator(run + "-full", 3);
    auto a = member(run + "-full", "a", kSteps, "", settings), b = member(run + "-full", "b", kSteps, "", settings),
         c = member(run + "-full", "c", kSteps, "", settings);
    for (auto* m : {a.get(), b.get(), c.get()}) ASSERT_EQ(m->wait(180), 0) << m->output();
  }
  const std::string uninterrupted = final_global(run + "-full", "a-1", kSteps);
  ASSERT_FALSE(uninterrupted.empty());
  {
    const auto coordinator_process = coordinator(run + "-all", 3);
    auto a = member(run + "-all", "a", kSteps, "", algorithm, resume_from("a")),
         b = member(run + "-all", "b", kSteps, "", algorithm, resume_from("b")),
         c = member(run + "-all", "c", kSteps, "", algorithm, resume_from("c"));
    for (auto* m : {a.get(), b.get(), c.get()}) {
      EXPECT_EQ(m->wait(180), 0) << m->output();
      EXPECT_NE(m->output().find("resuming after step 12"), std::string::npos) << m->output();
    }
  }
  for (const std::string m : {"a-1", "b-1", "c-1"}) {
    EXPECT_TRUE(final_global(run + "-all", m, kSteps) == uninterrupted) << m << " differs from the uninterrupted run";
    nlohmann::json last;
    events(run + "-all", m, "quorum", &last);
    EXPECT_EQ(last.at("outer_steps"), kSteps / 4) << m << ": " << last;
  }
  {
    const auto coordinator_process = coordinator(run + "-one", 3);
    auto a = member(run + "-one", "a", kSteps, "", algorithm, resume_from("a")),
         b = member(run + "-one", "b", kSteps, "", algorithm), c = member(run + "-one", "c", kSteps, "", algorithm);
    for (auto* m : {a.get(), b.get(), c.get()}) EXPECT_EQ(m->wait(180), 0) << m->output();
    for (auto* m : {b.get(), c.get()}) {
      EXPECT_NE(m->output().find("healed from a#1, "), std::string::npos) << m->output();
      EXPECT_NE(m->output().find("step 0 -> 12"), std::string::npos) << m->output();
    }
  }
  const std::string ga = final_global(run + "-one", "a-1", kSteps);
  EXPECT_FALSE(ga.empty());
  for (const std::string m : {"b-1", "c-1"}) EXPECT_TRUE(final_global(run + "-one", m, kSteps) == ga) << m;
  nlohmann::json last;
  events(run + "-one", "b-1", "quorum", &last);
  EXPECT_EQ(last.at("outer_steps"), kSteps / 4) << last;
}

TEST_F(ElasticTrain, ARunResumesFromItsMembersCheckpoints) { resumes_from_members_checkpoints("resume", {}); }

// SparseLoCo: each member's accumulator comes back from its own checkpoint (a member that resumed without it
// would send other values, and the global parameters would differ); members that heal restart theirs at 0.
TEST_F(ElasticTrain, ASparselocoRunResumesFromItsMembersCheckpoints) {
  resumes_from_members_checkpoints("sparse-resume",
                                   {"dist.algorithm=sparseloco", "sparseloco.sync_every=4", "sparseloco.topk=8"});
}

// Note "threads-resume": replicas as threads resumed from the checkpoint a stop names (replica 0's) each take
// their own part of that step and end as the uninterrupted run did, to the last bit of every model. Before,
// every replica resumed from replica 0's part (its AdamW moments, its data position): another run.
TEST_F(ElasticTrain, ReplicasAsThreadsResumeEachFromItsOwnCheckpoint) {
  constexpr int kSteps = 24;
  const auto train = [&](const std::string& run, const std::vector<std::string>& settings,
                         const std::vector<std::string>& resume) {
    std::vector<std::string> args = {LOCO_BINARY, "train",
                                     "--config",  config().string(),
                                     "--set",     "dist.backend=local",
                                     "--set",     "dist.replicas=2",
                                     "--set",     "train.checkpoint_every=6",
                                     "--set",     "train.out_dir=" + (*dir_ / run).string(),
                                     "--set",     "train.steps=" + std::to_string(kSteps)};
    for (const std::string& setting : settings) {
      args.push_back("--set");
      args.push_back(setting);
    }
    args.insert(args.end(), resume.begin(), resume.end());
    test::ChildProcess process(args);
    EXPECT_EQ(process.wait(180), 0) << process.output();
    return process.output();
  };
  // Note "resume-inside-round" (audit round 14): step 18 lies inside the round of steps 16 to 20 (H = 4), where
  // each replica goes on reading its part where it stopped (before: the rest of the round was skipped, and the
  // run ended another). NoLoCo lays its rounds out the same way.
  for (const auto& [name, settings] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"threads", {}}, {"threads-noloco", {"dist.algorithm=noloco", "noloco.sync_every=4"}}}) {
    train(name + "-full", settings, {});
    const fs::path members = *dir_ / (name + "-full") / "members";
    for (const std::string step : {"step_12", "step_18"}) {
      const std::string run = name + "-resumed-" + step;
      const std::string said =
          train(run, settings, {"--resume", (members / "replica-0-1" / "checkpoints" / step).string()});
      EXPECT_NE(said.find("replica-1 resumes from " + (members / "replica-1-1" / "checkpoints" / step).string()),
                std::string::npos)
          << said;
      for (const std::string member : {"replica-0-1", "replica-1-1"}) {
        const std::string uninterrupted = final_global(name + "-full", member, kSteps, "");
        EXPECT_FALSE(uninterrupted.empty()) << member;
        EXPECT_TRUE(final_global(run, member, kSteps, "") == uninterrupted)
            << run << ": " << member << "'s model differs from the uninterrupted run's";
      }
    }
  }
}

// Note "resume-earlier-life" (run/elastic_member_run.cpp): every rank of `loco launch --elastic` dies after step
// 20 (checkpoints every 8 steps). The launcher starts them again; each resumes from its first process's step-16
// checkpoint, and the run goes on from there to its end: no outer step counted twice or lost, the two ranks
// alike at the end. (Before, they started from nothing and trained the run again from step 0.)
TEST_F(ElasticTrain, LaunchResumesRanksThatAllDiedFromTheirCheckpoints) {
  constexpr int kSteps = 48;
  const std::string out = launched("all-died", 2, 2, "20:KILL", kSteps, {"train.checkpoint_every=8"});
  for (const std::string rank : {"0", "1"}) {
    EXPECT_NE(out.find("rank " + rank + " was killed by SIGKILL; starting it again"), std::string::npos) << out;
    EXPECT_NE(
        out.find("[rank " + rank + "] loco train: member rank-" + rank + " (process 2 of its rank) resumes from " +
                 (*dir_ / "all-died" / "members" / ("rank-" + rank + "-1") / "checkpoints" / "step_16").string()),
        std::string::npos)
        << out;
  }
  // A rank that came back only as the other finished heals to the last step and writes no checkpoint of its own
  // (its final state is the other's); every final checkpoint holds the same global parameters.
  std::vector<std::string> finals;
  for (const std::string member : {"rank-0-2", "rank-1-2"}) {
    const std::string global = final_global("all-died", member, kSteps);
    if (global.empty()) {
      EXPECT_NE(out.find("[rank " + member.substr(5, 1) + "] loco train: member " + member.substr(0, 6) +
                         "#2 stops: it "
                         "took the state of step 48 from a member that finished the run"),
                std::string::npos)
          << out;
      continue;
    }
    finals.push_back(global);
    nlohmann::json last;
    events("all-died", member, "quorum", &last);
    EXPECT_EQ(last.at("outer_steps"), kSteps / 4) << member << ": " << last;
  }
  ASSERT_FALSE(finals.empty()) << out;
  EXPECT_TRUE(finals.front() == finals.back()) << "ranks 0 and 1 differ";
}

// Note "own-part" (run/elastic_member_run.h, audit round 14): `loco launch --elastic … -- train --resume
// OUT/members/rank-0-1/checkpoints/step_8`, the command a stop advises, resumes every rank from its own part of
// step 8, and the run ends as the uninterrupted one did, to the last bit. Step 8 is a synchronisation, where
// the ranks' parameters agree but not their AdamW moments or data positions: before, rank 1 resumed from rank
// 0's part, exit 0, and the run was another.
TEST_F(ElasticTrain, ALaunchResumedFromOneRanksCheckpointResumesEachRankFromItsOwnPart) {
  constexpr int kSteps = 12;
  launched("own-part", 2, 0, "", kSteps, {"train.checkpoint_every=2"});
  const fs::path named = *dir_ / "own-part" / "members" / "rank-0-1" / "checkpoints" / "step_8";
  const std::string out = launched("own-part-resumed", 2, 0, "", kSteps, {}, {"--resume", named.string()});
  EXPECT_NE(out.find("[rank 1] loco train: member rank-1 resumes from its own part of that step, " +
                     (*dir_ / "own-part" / "members" / "rank-1-1" / "checkpoints" / "step_8").string()),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("[rank 0] loco train: member rank-0 resumes from its own part"), std::string::npos) << out;
  // Step 6 lies inside the round of steps 4 to 8 (note "resume-inside-round").
  const std::string inside =
      launched("own-part-inside", 2, 0, "", kSteps, {}, {"--resume", (named.parent_path() / "step_6").string()});
  for (const std::string member : {"rank-0-1", "rank-1-1"}) {
    const std::string uninterrupted = final_global("own-part", member, kSteps, "");
    EXPECT_FALSE(uninterrupted.empty()) << member;
    EXPECT_TRUE(final_global("own-part-resumed", member, kSteps, "") == uninterrupted)
        << member << "'s final model differs from the uninterrupted run's\n"
        << out;
    EXPECT_TRUE(final_global("own-part-inside", member, kSteps, "") == uninterrupted)
        << member << "'s final model, resumed inside a round, differs from the uninterrupted run's\n"
        << inside;
  }
}

}  // namespace loco
