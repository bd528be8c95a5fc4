// Process groups re-formed per quorum (src/loco/elastic/quorum_group.h), with real processes: a
// coordinator (`loco coordinator`, which also serves the run's only store) and three members
// (tests/elastic/elastic_worker.cpp) that all-reduce a 1 per round. One member is killed (SIGKILL) or
// stopped (SIGSTOP) in round 5, after the round's quorum formed, while the others are in its all-reduce;
// they must give that all-reduce up, re-form a group of two without restarting and finish every round,
// each round's sum equal to its quorum's size.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "loco/membership/authentication.h"
#include "support/child_process.h"
#include "support/test_support.h"

namespace loco {
namespace {

constexpr int kRounds = 12;
constexpr int kFaultRound = 5;

struct Round {
  int quorum_id = 0;
  int size = 0;
  double sum = 0;
};

// The rounds a worker completed, by number (the last line of each round).
std::map<int, Round> completed_rounds(const std::string& output) {
  std::map<int, Round> rounds;
  const std::regex line(R"(round (\d+) quorum (\d+) size (\d+) sum ([0-9.]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    rounds[std::stoi((*it)[1])] = {std::stoi((*it)[2]), std::stoi((*it)[3]), std::stod((*it)[4])};
  }
  return rounds;
}

void survivors_go_on(const char* fault) {
  const std::string secret = test::use_test_run_secret();
  test::ChildProcess coordinator({LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0", "--run-id",
                                  "elastic", "--min-replicas", "2", "--start-replicas", "3", "--heartbeat-timeout-s", "1",
                                  "--join-window-s", "0.5"});
  const auto banner = coordinator.wait_for(std::regex("127.0.0.1:([0-9]+)"), 30);
  ASSERT_TRUE(banner) << coordinator.output();
  const std::string address = "127.0.0.1:" + (*banner)[1];
  auto worker = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {LOCO_ELASTIC_WORKER, "--coordinator", address, "--run-id", "elastic",
                                     "--name", name, "--rounds", std::to_string(kRounds)};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<test::ChildProcess>(args);
  };
  auto a = worker("a", {});
  auto b = worker("b", {});
  auto c = worker("c", {fault, std::to_string(kFaultRound)});
  for (auto* survivor : {a.get(), b.get()}) {
    EXPECT_EQ(survivor->wait(120), 0) << survivor->output();
    const auto rounds = completed_rounds(survivor->output());
    ASSERT_FALSE(rounds.empty()) << survivor->output();
    EXPECT_EQ(rounds.size(), static_cast<std::size_t>(kRounds)) << survivor->output();
    EXPECT_EQ(rounds.begin()->second.size, 3) << survivor->output();  // the run started with all three
    for (const auto& [number, round] : rounds) {
      EXPECT_EQ(round.sum, round.size) << "round " << number << "\n" << survivor->output();
    }
    ASSERT_TRUE(rounds.count(kRounds)) << survivor->output();
    EXPECT_EQ(rounds.at(kRounds).size, 2) << survivor->output();
  }
  // The fault hit inside a collective: some survivor gave round 5's all-reduce up and retried it.
  const std::regex abandoned("round " + std::to_string(kFaultRound) + " attempt 1 abandoned");
  EXPECT_TRUE(std::regex_search(a->output(), abandoned) || std::regex_search(b->output(), abandoned))
      << a->output() << b->output();
  // c took part in every round before its fault.
  EXPECT_EQ(completed_rounds(c->output()).size(), static_cast<std::size_t>(kFaultRound - 1)) << c->output();
  // The coordinator saw c go silent (its heartbeat thread died or stopped with it).
  httplib::Client client("127.0.0.1", std::stoi((*banner)[1]));
  const httplib::Headers token = {{membership::kStatusTokenHeader, membership::status_token(secret, "elastic")}};
  const auto c_expired = [&] {
    const auto status = nlohmann::json::parse(client.Get("/status", token)->body);
    for (const auto& e : status.at("events")) {
      if (e.at("kind") == "expire" && e.at("detail").get<std::string>().rfind("c#1", 0) == 0) return true;
    }
    return false;
  };
  const auto start = std::chrono::steady_clock::now();
  while (!c_expired() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(c_expired()) << client.Get("/status", token)->body;
}

TEST(ElasticGroups, SurvivorsGoOnAfterAKill) { survivors_go_on("--die-at"); }

// A member dies after its quorum formed and before the quorum's group is built (d left after round 4, so
// round 5's quorum is new and every member builds a group): the others, waiting for it at the group's
// rendezvous, give the rendezvous up when the coordinator says the quorum broke (not after the rendezvous
// timeout of 20 s) and finish in a group of two.
TEST(ElasticGroups, SurvivorsGiveUpARendezvousWithAMemberThatDied) {
  test::use_test_run_secret();
  test::ChildProcess coordinator({LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0", "--run-id",
                                  "elastic", "--min-replicas", "2", "--start-replicas", "4", "--heartbeat-timeout-s", "1",
                                  "--join-window-s", "0.5"});
  const auto banner = coordinator.wait_for(std::regex("127.0.0.1:([0-9]+)"), 30);
  ASSERT_TRUE(banner) << coordinator.output();
  auto worker = [&](const std::string& name, int rounds, std::vector<std::string> extra) {
    std::vector<std::string> args = {LOCO_ELASTIC_WORKER, "--coordinator", "127.0.0.1:" + (*banner)[1], "--run-id",
                                     "elastic", "--name", name, "--rounds", std::to_string(rounds)};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<test::ChildProcess>(args);
  };
  auto a = worker("a", kRounds, {});
  auto b = worker("b", kRounds, {});
  auto c = worker("c", kRounds, {"--die-building-at", std::to_string(kFaultRound)});
  auto d = worker("d", kFaultRound - 1, {});
  EXPECT_EQ(d->wait(120), 0) << d->output();
  EXPECT_EQ(c->wait(120), 128 + 9) << c->output();
  for (auto* survivor : {a.get(), b.get()}) {
    EXPECT_EQ(survivor->wait(120), 0) << survivor->output();
    const auto rounds = completed_rounds(survivor->output());
    EXPECT_EQ(rounds.size(), static_cast<std::size_t>(kRounds)) << survivor->output();
    ASSERT_TRUE(rounds.count(kFaultRound)) << survivor->output();
    EXPECT_EQ(rounds.at(kFaultRound).size, 2) << survivor->output();
    EXPECT_EQ(rounds.at(kFaultRound).sum, 2) << survivor->output();
    EXPECT_TRUE(std::regex_search(survivor->output(),
                                  std::regex("round 5 attempt 1 abandoned .*gave up its rendezvous")))
        << survivor->output();
  }
}

TEST(ElasticGroups, SurvivorsGoOnAfterAStop) { survivors_go_on("--stop-at"); }

}  // namespace
}  // namespace loco
