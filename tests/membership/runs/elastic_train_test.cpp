// `loco train` with dist.elastic = true, as a user runs it (docs/fault-tolerance.md "Elastic DiLoCo"):
// a coordinator and member processes on a tiny byte-level corpus. A member killed mid-run or inside the
// all-reduce (LOCO_FAULT) leaves the others to finish in a quorum of two; a member started late heals
// from a live one and finishes with them, also when its donor dies while sending (another donor takes
// over) or a chunk of the state is corrupted on its way (refused and sent again); a stopped member is
// fenced out, then rejoins and heals; the run survives a restart of its coordinator; `loco launch
// --elastic` restarts a killed rank, which heals; replicas as threads of one process (dist.backend = local)
// leave, return and stall as dist.churn says. Elastic data parallel (a quorum and a vote every step) goes
// through a kill and simulated churn too, and so does NoLoCo (groups drawn from each quorum, no vote).
// Every member that finishes ends with bit-identical global parameters (data parallel: bit-identical
// models; NoLoCo's replicas differ by design).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "loco/membership/authentication.h"
#include "support/child_process.h"
#include "support/test_support.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

class ElasticTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    secret_ = test::use_test_run_secret();
    dir_ = new test::ScratchDir();
    test::prepare_tiny_byte_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  // The coordinator of a run; its address in `address_`, its store's port in `store_port_`. Ports 0: free
  // ones (a replacement coordinator takes its predecessor's). `fault`: its LOCO_COORDINATOR_FAULT.
  std::unique_ptr<test::ChildProcess> coordinator(const std::string& run, int start_replicas, int port = 0,
                                                  int store_port = 0, int min_replicas = 2,
                                                  const std::string& fault = "",
                                                  const std::string& heartbeat_timeout_s = "1") {
    auto c = std::make_unique<test::ChildProcess>(std::vector<std::string>{"/usr/bin/env",
                                                                           "LOCO_COORDINATOR_FAULT=" + fault,
                                                                           LOCO_BINARY,
                                                                           "coordinator",
                                                                           "--host",
                                                                           "127.0.0.1",
                                                                           "--port",
                                                                           std::to_string(port),
                                                                           "--store-port",
                                                                           std::to_string(store_port),
                                                                           "--run-id",
                                                                           run,
                                                                           "--min-replicas",
                                                                           std::to_string(min_replicas),
                                                                           "--start-replicas",
                                                                           std::to_string(start_replicas),
                                                                           "--heartbeat-timeout-s",
                                                                           heartbeat_timeout_s,
                                                                           "--join-window-s",
                                                                           "0.5"});
    const auto banner = c->wait_for(std::regex("127.0.0.1:([0-9]+) .*store on port ([0-9]+)"), 30);
    EXPECT_TRUE(banner) << c->output();
    address_ = banner ? "127.0.0.1:" + (*banner)[1] : "";
    store_port_ = banner ? std::stoi((*banner)[2]) : 0;
    return c;
  }

  // A member process of run `run` named `name`, with `fault` as LOCO_FAULT ("" for none), `settings` as
  // --set overrides and `arguments` after them.
  std::unique_ptr<test::ChildProcess> member(const std::string& run, const std::string& name, int steps,
                                             const std::string& fault = "",
                                             const std::vector<std::string>& settings = {},
                                             const std::vector<std::string>& arguments = {}) {
    std::vector<std::string> args = {"/usr/bin/env", "LOCO_COORDINATOR=" + address_, "LOCO_RUN_ID=" + run,
                                     "LOCO_MEMBER_NAME=" + name};
    // A member that waits for a quorum that never comes gives up after comm.timeout_s.
    if (!fault.empty()) args.push_back("LOCO_FAULT=" + fault);
    for (const std::string& a :
         {std::string(LOCO_BINARY), std::string("train"), std::string("--config"), config().string(),
          std::string("--set"), "train.out_dir=" + (*dir_ / run).string(), std::string("--set"),
          "train.steps=" + std::to_string(steps), std::string("--set"), std::string("comm.timeout_s=60")}) {
      args.push_back(a);
    }
    for (const std::string& setting : settings) {
      args.push_back("--set");
      args.push_back(setting);
    }
    args.insert(args.end(), arguments.begin(), arguments.end());
    return std::make_unique<test::ChildProcess>(args);
  }

  fs::path config() {
    const fs::path path = *dir_ / "elastic.toml";
    test::write_text(path, "[model]\nhidden_size = 32\nnum_hidden_layers = 2\nnum_attention_heads = 4\n"
                           "[data]\ndir = \"" + (*dir_ / "data").string() + "\"\nseq_len = 16\n"
                           "[optim]\nlr = 3e-3\nwarmup_steps = 2\n"
                           "[train]\nbatch_size = 2\neval_every = 0\neval_batches = 1\nlog_every = 4\nthreads = 1\n"
                           "[dist]\nalgorithm = \"diloco\"\nbackend = \"gloo\"\nbatch = \"per_replica\"\n"
                           "elastic = true\nreplicas = 3\n"
                           "[diloco]\nsync_every = 4\n");
    return path;
  }

  // The bytes of a file of a member's final checkpoint.
  std::string final_file(const std::string& run, const std::string& member_dir, int steps, const std::string& name) {
    return test::read_text(*dir_ / run / "members" / member_dir / "checkpoints" / ("step_" + std::to_string(steps)) /
                           name);
  }

  // The bytes of the global parameters a member ended with (its final checkpoint's strategy state; the
  // safetensors layout read by hand: this test binary has no libtorch). Data parallel members (`tensor`
  // empty): their whole model file.
  // `loco launch --elastic` of `nproc` ranks (LOCO_FAULT `fault`, restarts up to `max_restarts`) training run
  // `run` for `steps` steps with `settings` as further --set overrides; its output, once it exited 0.
  std::string launched(const std::string& run, int nproc, int max_restarts, const std::string& fault, int steps,
                       const std::vector<std::string>& settings = {}) {
    std::vector<std::string> args = {"/usr/bin/env", "LOCO_FAULT=" + fault, LOCO_BINARY, "launch", "--elastic",
                                     "--nproc", std::to_string(nproc), "--max-restarts", std::to_string(max_restarts),
                                     "--heartbeat-timeout-s", "1", "--join-window-s", "0.5", "--", "train", "--config",
                                     config().string(), "--set", "train.out_dir=" + (*dir_ / run).string(), "--set",
                                     "train.steps=" + std::to_string(steps), "--set", "comm.timeout_s=60"};
    for (const std::string& setting : settings) {
      args.push_back("--set");
      args.push_back(setting);
    }
    test::ChildProcess launch(args);
    EXPECT_EQ(launch.wait(300), 0) << launch.output();
    return launch.output();
  }

  std::string final_global(const std::string& run, const std::string& member_dir, int steps,
                           const std::string& tensor = "outer/global") {
    if (tensor.empty()) return final_file(run, member_dir, steps, "model.safetensors");
    const std::string bytes = final_file(run, member_dir, steps, "strategy.safetensors");
    if (bytes.size() < 8) return "";
    std::uint64_t header_length = 0;
    for (int i = 0; i < 8; ++i) header_length |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    const auto header = nlohmann::json::parse(bytes.substr(8, header_length));
    const auto offsets = header.at(tensor).at("data_offsets");
    const std::size_t begin = 8 + header_length + offsets[0].get<std::size_t>();
    return bytes.substr(begin, offsets[1].get<std::size_t>() - offsets[0].get<std::size_t>());
  }

  // The membership events of kind `kind` in a member's metrics.jsonl, and the last line's fields.
  std::vector<nlohmann::json> events(const std::string& run, const std::string& member_dir, const std::string& kind,
                                     nlohmann::json* last_line = nullptr) {
    std::ifstream in(*dir_ / run / "members" / member_dir / "metrics.jsonl");
    std::vector<nlohmann::json> found;
    std::string line;
    while (std::getline(in, line)) {
      const auto record = nlohmann::json::parse(line);
      if (last_line) *last_line = record;
      for (const auto& e : record.value("membership_events", nlohmann::json::array())) {
        if (e.at("kind") == kind) found.push_back(e);
      }
    }
    return found;
  }

  // How a test checks an algorithm's members: `settings` choose it; the last metrics line's `counter` counts
  // the committed synchronisations; `tensors` name the global parameters in a checkpoint ("" for the whole
  // model, data parallel).
  // NoLoCo's replicas differ by design: `tensors` empty, nothing compared.
  struct Checks {
    std::vector<std::string> settings;
    std::string counter = "outer_steps";
    std::vector<std::string> tensors = {"outer/global"};
  };
  static Checks data_parallel() { return {{"dist.algorithm=ddp"}, "commits", {""}}; }
  static Checks noloco() { return {{"dist.algorithm=noloco", "noloco.sync_every=4"}, "outer_steps", {}}; }
  void survivors_finish(const std::string& run, const std::string& fault, const Checks& checks,
                        int synchronisations, int steps = 24);
  void simulated_churn(const std::string& run, const Checks& checks, int synchronisations);
  void resumes_from_members_checkpoints(const std::string& run, const std::vector<std::string>& settings);
  void stops_while_waiting(const std::string& run, const Checks& checks, int stopped_after, int synchronisations);
  void removes_a_replica_sending_nan(const std::string& run, const std::vector<std::string>& settings,
                                     const std::string& refusal);

  static constexpr int kLateJoinSteps = 400;  // long enough that the late member arrives before the others finish
  struct LateJoin {
    std::unique_ptr<test::ChildProcess> coordinator, a, b, c;
  };
  LateJoin late_member_joins(const std::string& run, const std::string& a_fault);

  static test::ScratchDir* dir_;
  static std::string secret_;
  std::string address_;
  int store_port_ = 0;
};
test::ScratchDir* ElasticTrain::dir_ = nullptr;
std::string ElasticTrain::secret_;

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
  ASSERT_TRUE(std::regex_search(c_output, said, std::regex("member c#1 left the run after step (\\d+): stopped by SIGTERM")))
      << c_output;
  const int step = std::stoi(said[1]);
  EXPECT_GE(step, 12);
  EXPECT_LT(step, kSteps);
  EXPECT_TRUE(fs::exists(*dir_ / "sigterm" / "members" / "c-1" / "checkpoints" / ("step_" + std::to_string(step)) /
                         "state.json")) << c_output;
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
    EXPECT_NE(said.find("elastic member a#1: stopped by SIGTERM while waiting for a quorum"), std::string::npos) << said;
    EXPECT_NE(said.find(fmt::format("member a#1 left the run after step {}: stopped by SIGTERM", stopped_after)),
              std::string::npos) << said;
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

TEST_F(ElasticTrain, AMemberWaitingForAQuorumStopsWhenSignalled) { stops_while_waiting("waitstop", Checks{}, 12, 24 / 4); }

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
            std::string::npos) << a->output();
  EXPECT_FALSE(fs::exists(*dir_ / "nojoin")) << a->output();
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

// The same for members as threads of one process (dist.backend = local): each stops after its current step
// with its checkpoint and leaves; the process says so and exits with 128 + the signal.
TEST_F(ElasticTrain, MembersAsThreadsEachStopWithACheckpoint) {
  const fs::path run = *dir_ / "threads-sigint", members = run / "members";
  const pid_t pid = test::start_loco({"train", "--config", config().string(), "--set", "dist.backend=local", "--set",
                                      "dist.replicas=2", "--set", "train.steps=100000", "--set", "train.log_every=1",
                                      "--set", "train.out_dir=" + run.string()},
                                     *dir_ / "threads-sigint.out", *dir_ / "threads-sigint.err");
  const bool started = test::eventually([&] { return test::read_metrics(members / "replica-0-1").size() >= 3; },
                                        std::chrono::seconds(60));
  ::kill(pid, SIGINT);
  const int status = test::wait_exit(pid, std::chrono::seconds(60));
  const std::string said = test::read_text(*dir_ / "threads-sigint.out") + test::read_text(*dir_ / "threads-sigint.err");
  EXPECT_EQ(status, 128 + SIGINT) << said;
  ASSERT_TRUE(started) << said;
  EXPECT_NE(said.find("stopped by SIGINT after step"), std::string::npos) << said;
  for (const std::string member : {"replica-0", "replica-1"}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(said, m, std::regex("member " + member + "#1 left the run after step (\\d+): stopped by SIGINT")))
        << said;
    EXPECT_TRUE(fs::exists(members / (member + "-1") / "checkpoints" / ("step_" + m[1].str()) / "state.json")) << said;
  }
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
  test::ChildProcess a({"/usr/bin/env", "LOCO_COORDINATOR=" + address_, "LOCO_RUN_ID=bare", "LOCO_MEMBER_NAME=a",
                        LOCO_BINARY, "train", "--resume",
                        (*dir_ / "bare-first" / "members" / "a-1" / "checkpoints" / "step_8").string(), "--set",
                        "train.out_dir=" + (*dir_ / "bare").string(), "--set", "train.steps=12", "--set",
                        "comm.timeout_s=60"});
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
  ASSERT_TRUE(std::regex_search(metrics->body, commits, std::regex(R"(loco_membership_events_total\{kind="commit"\} ([0-9]+))")))
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

// Note "elastic-resume": a run whose members all stopped goes on from their checkpoints. Three members train
// 24 steps with a checkpoint at step 12; three new processes resume from those step-12 checkpoints, each from
// its own, and end with the global parameters of the uninterrupted run to the last bit (a spurious outer
// step at the resume, or a data round laid out anew, would change them). Then only a resumes and b and c
// start afresh: they heal from it at step 12 and the three finish together, every outer step counted once.
void ElasticTrain::resumes_from_members_checkpoints(const std::string& run,
                                                    const std::vector<std::string>& algorithm) {
  constexpr int kSteps = 24;
  std::vector<std::string> settings = algorithm;
  settings.push_back("train.checkpoint_every=12");
  const auto resume_from = [&](const std::string& m) {
    return std::vector<std::string>{"--resume", (*dir_ / (run + "-full") / "members" / (m + "-1") / "checkpoints" /
                                                 "step_12").string()};
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
  resumes_from_members_checkpoints("sparse-resume", {"dist.algorithm=sparseloco", "sparseloco.sync_every=4",
                                                     "sparseloco.topk=8"});
}

// dist.backend = "local" with dist.churn: three replicas as threads of one process, each a member of a
// coordinator the process serves. Replica 2 leaves at step 10 and returns (as a new member, healing) when
// the run reaches step 30; replica 1 stalls at step 60 (no heartbeats) until the others reach step 80,
// which they do only once its heartbeat has expired (the local coordinator's join window is 30 s); it
// rejoins by itself and heals. (A stall of 2 s let the others finish first on a fast machine: it then
// trained alone and healed from nobody.) No committed outer step is lost and the three end with bit-identical globals
// (`tensors`: the names of the global parameters in a checkpoint).
void ElasticTrain::simulated_churn(const std::string& run, const Checks& checks, int synchronisations) {
  constexpr int kSteps = 400;
  std::vector<std::string> args = {LOCO_BINARY, "train", "--config", config().string(), "--set", "dist.backend=local",
                                   "--set", "dist.churn=2@10:leave, 2@30:return, 1@60:stall-until=80", "--set",
                                   "train.out_dir=" + (*dir_ / run).string(), "--set",
                                   "train.steps=" + std::to_string(kSteps)};
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
        "rejoined as replica-1#2",
        "2 members (replica-0#1, replica-1#1)"}) {
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

// Note "threads-resume": replicas as threads resumed from the checkpoint a stop names (replica 0's) each take
// their own part of that step and end as the uninterrupted run did, to the last bit of every model. Before,
// every replica resumed from replica 0's part (its AdamW moments, its data position): another run.
TEST_F(ElasticTrain, ReplicasAsThreadsResumeEachFromItsOwnCheckpoint) {
  constexpr int kSteps = 24;
  const auto train = [&](const std::string& run, const std::vector<std::string>& resume) {
    std::vector<std::string> args = {LOCO_BINARY, "train",
                                     "--config",  config().string(),
                                     "--set",     "dist.backend=local",
                                     "--set",     "dist.replicas=2",
                                     "--set",     "train.checkpoint_every=12",
                                     "--set",     "train.out_dir=" + (*dir_ / run).string(),
                                     "--set",     "train.steps=" + std::to_string(kSteps)};
    args.insert(args.end(), resume.begin(), resume.end());
    test::ChildProcess process(args);
    EXPECT_EQ(process.wait(180), 0) << process.output();
    return process.output();
  };
  train("threads-full", {});
  const fs::path members = *dir_ / "threads-full" / "members";
  const std::string said =
      train("threads-resumed", {"--resume", (members / "replica-0-1" / "checkpoints" / "step_12").string()});
  EXPECT_NE(said.find("replica-1 resumes from " + (members / "replica-1-1" / "checkpoints" / "step_12").string()),
            std::string::npos)
      << said;
  for (const std::string member : {"replica-0-1", "replica-1-1"}) {
    const std::string uninterrupted = final_global("threads-full", member, kSteps, "");
    EXPECT_FALSE(uninterrupted.empty()) << member;
    EXPECT_TRUE(final_global("threads-resumed", member, kSteps, "") == uninterrupted)
        << member << "'s model differs from the uninterrupted run's";
  }
}

TEST_F(ElasticTrain, SimulatedChurnInOneProcess) { simulated_churn("churn", Checks{}, 400 / 4); }

// Streaming DiLoCo without overlap: two fragments in turn (H = 4: one synchronises every 2 steps), each
// outer step committed in two phases like DiLoCo's.
TEST_F(ElasticTrain, StreamingDilocoUnderSimulatedChurn) {
  simulated_churn("streaming",
                  {{"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2", "streaming.overlap=0"},
                   "outer_steps",
                   {"outer/0/global", "outer/1/global"}},
                  400 / 2);
}

// Streaming DiLoCo with overlap (τ = 1, note "elastic-overlap"): each fragment's exchange runs while the
// next inner step does. The leave at step 10 and the stall at step 60 each break a quorum while its exchange
// is in flight; the outer step is retried one step later with the kept pseudo-gradients and commits.
TEST_F(ElasticTrain, StreamingDilocoWithOverlapUnderSimulatedChurn) {
  simulated_churn("streaming-overlap",
                  {{"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2", "streaming.overlap=1"},
                   "outer_steps",
                   {"outer/0/global", "outer/1/global"}},
                  400 / 2);
}

// The same, with c killed at its first exchange while a and b already exchange in the background: they
// learn of it when the outer step is due (one step later), retry it in a quorum of two and lose none.
TEST_F(ElasticTrain, StreamingWithOverlapSurvivorsFinishAfterAMemberIsKilledInsideTheExchange) {
  survivors_finish("streaming-overlap-exchange", "exchanging:KILL",
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
    std::vector<std::string> args = {LOCO_BINARY, "train", "--config", config().string(), "--set", "dist.backend=local",
                                     "--set", "dist.replicas=1", "--set", "dist.algorithm=streaming", "--set",
                                     "streaming.sync_every=8", "--set", "streaming.fragments=2", "--set",
                                     "streaming.overlap=2", "--set", "streaming.mix=0.25", "--set",
                                     std::string("dist.elastic=") + (elastic ? "true" : "false"), "--set",
                                     "train.steps=42", "--set", "train.checkpoint_every=20", "--set",
                                     "train.out_dir=" + (*dir_ / run).string()};
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
  std::vector<std::string> args = {LOCO_BINARY, "train", "--config", config().string(), "--set", "dist.backend=local",
                                   "--set", "dist.adversary=2@8:nan", "--set", "train.steps=" + std::to_string(kSteps),
                                   "--set", "train.out_dir=" + (*dir_ / run).string()};
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
  simulated_churn("sparseloco-churn",
                  {{"dist.algorithm=sparseloco", "sparseloco.sync_every=4", "sparseloco.topk=8"},
                   "outer_steps",
                   {"outer/global"}},
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
                              "--set", "dist.algorithm=ddp", "--set", std::string("dist.elastic=") +
                              (elastic ? "true" : "false"), "--set", "train.steps=30", "--set", "train.eval_batches=2",
                              "--set", "train.out_dir=" + (*dir_ / run).string()});
    EXPECT_EQ(train.wait(120), 0) << train.output();
    std::ifstream in(elastic ? *dir_ / run / "members" / "replica-0-1" / "metrics.jsonl" : *dir_ / run / "metrics.jsonl");
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
    EXPECT_NE(out.find("rank " + std::to_string(killed) + " was killed by SIGKILL; starting it again"), std::string::npos)
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
          << "stage " << stage << " heals from its twin\n" << out;
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
        EXPECT_TRUE(mine == final_global(run, live + part, kSteps, tensor)) << "stage " << stage << " differs from its twin";
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
  const std::string out = launched("pipeline-all-died", 4, 4, "20:KILL", kSteps,
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

// The ranks of `loco launch --elastic` play a dist.churn schedule as the threads do: rank 2 kills itself
// after step 10 (kill -9; the launcher reports it and starts it again), its second process waits for the
// run to reach step 30 and joins as a new member, which heals; rank 1 stalls after step 60 until the
// others reach step 80, which they do only once its heartbeat has expired (the join window is longer than
// the heartbeat timeout); it rejoins by itself and heals. Bit-identical globals at the end, every outer
// step committed.
TEST_F(ElasticTrain, LaunchPlaysAChurnScheduleOnItsRanks) {
  constexpr int kSteps = 400;
  test::ChildProcess launch({LOCO_BINARY, "launch", "--elastic", "--nproc", "3", "--max-restarts", "1",
                             "--heartbeat-timeout-s", "1", "--join-window-s", "30", "--", "train", "--config",
                             config().string(), "--set", "train.out_dir=" + (*dir_ / "launch-churn").string(), "--set",
                             "train.steps=" + std::to_string(kSteps), "--set", "comm.timeout_s=60", "--set",
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

}  // namespace
}  // namespace loco
