// The coordinator on the network (coordinator_server.h) with real members (member_client.h) on
// loopback: quorums, a silent member expiring, a leave seen at once by the others' heartbeats, members
// rejoining a replacement coordinator or after being expelled, another run's coordinator fencing them for
// good, and refused messages.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <future>
#include <thread>

#include "loco/membership/coordinator_server.h"
#include "loco/membership/member_client.h"

namespace loco::membership {
namespace {

using Clock = std::chrono::steady_clock;
using Ids = std::vector<std::string>;

ServerOptions server_options(int min_replicas, int port = 0) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.coordinator = {{min_replicas, /*start_replicas=*/0, /*heartbeat_timeout_s=*/1.0, /*join_window_s=*/0.5}, "test-run",
                    new_incarnation(), {}};
  o.heartbeat_interval_s = 0.05;
  o.log = [](const std::string&) {};
  return o;
}

MemberOptions member_at(int port, const std::string& name, double join_timeout_s = 60) {
  return {{"127.0.0.1", port}, "test-run", name, 2.0, join_timeout_s, [](const std::string&) {}};
}

MemberOptions member(const CoordinatorServer& server, const std::string& name) { return member_at(server.port(), name); }

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Waits up to `limit_s` for `condition`.
template <typename F>
bool eventually(F condition, double limit_s = 5) {
  const auto start = Clock::now();
  while (!condition()) {
    if (seconds_since(start) > limit_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(CoordinatorServer, MembersGetOneQuorumWithRanks) {
  CoordinatorServer server(server_options(2));
  server.start();
  MemberClient a(member(server, "a"));
  MemberClient b(member(server, "b"));
  auto qa = std::async(std::launch::async, [&] { return a.await_quorum(0, 10); });
  auto qb = std::async(std::launch::async, [&] { return b.await_quorum(0, 10); });
  const QuorumReply ra = qa.get(), rb = qb.get();
  EXPECT_EQ(ra.quorum_id, 1);
  EXPECT_EQ(ra.members, (Ids{"a#1", "b#1"}));
  EXPECT_EQ(rb.members, ra.members);
  EXPECT_EQ(ra.rank, 0);
  EXPECT_EQ(rb.rank, 1);
  EXPECT_EQ(ra.store_prefix, rb.store_prefix);
  EXPECT_FALSE(a.quorum_broken());
  // Two-phase outer step: both vote, both learn the same decision.
  auto va = std::async(std::launch::async, [&] { return a.vote(ra.quorum_id, 100, true, "abc", 10); });
  const CommitReply vb = b.vote(rb.quorum_id, 100, true, "abc", 10);
  const CommitReply decided_a = va.get();
  EXPECT_EQ(decided_a.outcome, Outcome::commit);
  EXPECT_EQ(vb.outcome, Outcome::commit);
  EXPECT_EQ(vb.canonical_hash, "abc");
  EXPECT_FALSE(vb.heal);
  try {
    a.vote(ra.quorum_id + 5, 200, true, "abc", 10);
    ADD_FAILURE() << "a vote for another quorum was accepted";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), Refusal::stale_quorum) << e.what();
  }
}

TEST(CoordinatorServer, ASilentMemberIsLeftBehindAfterTheHeartbeatTimeout) {
  CoordinatorServer server(server_options(1));
  server.start();
  // A member that joined and then stopped: it never heartbeats.
  httplib::Client raw("127.0.0.1", server.port());
  ASSERT_EQ(raw.Post("/v1/join", R"({"run_id": "test-run", "name": "stopped"})", "application/json")->status, 200);
  MemberClient a(member(server, "a"));
  const auto start = Clock::now();
  const QuorumReply q = a.await_quorum(0, 10);  // 1 of 2 healthy members is no majority until "stopped" expires
  const double waited = seconds_since(start);
  EXPECT_EQ(q.members, (Ids{"a#1"}));
  EXPECT_GT(waited, 0.5);  // it had to expire first (heartbeat timeout 1 s)
  EXPECT_LT(waited, 8.0);  // and nothing else held it (a long poll lasts up to 5 s)
  const auto status = nlohmann::json::parse(raw.Get("/status")->body);
  bool expired = false;
  for (const auto& e : status.at("events")) expired |= e.at("kind") == "expire" && e.at("detail").get<std::string>().rfind("stopped#1", 0) == 0;
  EXPECT_TRUE(expired) << status.dump(2);
}

TEST(CoordinatorServer, OthersLearnOfALeaveFromTheirNextHeartbeat) {
  CoordinatorServer server(server_options(2));
  server.start();
  MemberClient a(member(server, "a"));
  MemberClient b(member(server, "b"));
  auto qa = std::async(std::launch::async, [&] { return a.await_quorum(0, 10); });
  b.await_quorum(0, 10);
  qa.get();
  b.leave("preempted");
  ASSERT_TRUE(eventually([&] { return a.quorum_broken(); }));  // from a heartbeat, not a timeout
  httplib::Client raw("127.0.0.1", server.port());
  const std::string metrics = raw.Get("/metrics")->body;
  EXPECT_NE(metrics.find("loco_quorum_broken 1"), std::string::npos) << metrics;
  EXPECT_NE(raw.Get("/")->body.find("<html>"), std::string::npos);
}

TEST(CoordinatorServer, MembersRejoinAReplacementCoordinatorAndAnUndecidedVoteSaysSo) {
  auto first = std::make_unique<CoordinatorServer>(server_options(2));
  const int port = first->port();
  first->start();
  MemberClient a(member(*first, "a"));
  MemberClient b(member(*first, "b"));
  auto qb = std::async(std::launch::async, [&] { return b.await_quorum(4, 10); });
  const QuorumReply q = a.await_quorum(4, 10);
  qb.get();
  const Credentials before = a.credentials();
  // a votes and waits for b's vote, which never comes: the coordinator is replaced first.
  auto vote = std::async(std::launch::async, [&] { return a.vote(q.quorum_id, 4, true, "h", 10); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  first.reset();
  CoordinatorServer second(server_options(2, port));
  second.start();
  try {
    vote.get();
    ADD_FAILURE() << "a vote got a decision from a coordinator that never decided";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), Refusal::stale_incarnation) << e.what();
  }
  ASSERT_TRUE(eventually([&] { return a.rejoins() == 1 && b.rejoins() == 1; }));
  EXPECT_FALSE(a.fenced());
  EXPECT_TRUE(a.quorum_broken());
  EXPECT_NE(a.credentials().incarnation, before.incarnation);
  // The replacement's quorum: same names, its own numbering.
  auto qb2 = std::async(std::launch::async, [&] { return b.await_quorum(4, 10); });
  EXPECT_EQ(a.await_quorum(4, 10).members, (Ids{"a#1", "b#1"}));
  qb2.get();
}

TEST(CoordinatorServer, AnExpelledMemberRejoinsAsANewMemberAndItsOldVoteIsRefused) {
  CoordinatorServer server(server_options(2));
  server.start();
  MemberClient a(member(server, "a"));
  MemberClient b(member(server, "b"));
  auto qa = std::async(std::launch::async, [&] { return a.await_quorum(4, 10); });
  const QuorumReply q = b.await_quorum(4, 10);
  qa.get();
  server.expel("b#1", "its process was killed by SIGKILL");
  try {
    b.vote(q.quorum_id, 4, true, "h", 5);
    ADD_FAILURE() << "the vote of an expelled member was taken";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), Refusal::unknown_member) << e.what();
  }
  EXPECT_EQ(b.rejoins(), 1);
  EXPECT_EQ(b.credentials().member_id, "b#2");
  auto qa2 = std::async(std::launch::async, [&] { return a.await_quorum(8, 10); });
  EXPECT_EQ(b.await_quorum(8, 10).members, (Ids{"a#1", "b#2"}));
  qa2.get();
}

TEST(CoordinatorServer, AnotherRunsCoordinatorAtTheAddressFencesForGood) {
  auto first = std::make_unique<CoordinatorServer>(server_options(1));
  const int port = first->port();
  first->start();
  MemberClient a(member(*first, "a"));
  first.reset();
  ServerOptions other = server_options(1, port);
  other.coordinator.run_id = "another-run";
  CoordinatorServer second(other);
  second.start();
  ASSERT_TRUE(eventually([&] { return a.fenced().has_value(); }));
  EXPECT_NE(a.fenced()->find("'test-run' is not this coordinator's run"), std::string::npos) << *a.fenced();
  EXPECT_EQ(a.rejoins(), 0);
  EXPECT_THROW(a.await_quorum(0, 1), MembershipError);
}

// Members may start before their coordinator: the first join keeps trying for join_timeout_s.
TEST(CoordinatorServer, AMemberStartedBeforeItsCoordinatorJoinsWhenItComes) {
  int port = 0;
  {
    CoordinatorServer probe(server_options(1));  // a port that was free a moment ago
    port = probe.port();
    probe.start();
  }
  auto joining = std::async(std::launch::async, [&] { return std::make_unique<MemberClient>(member_at(port, "a", 10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CoordinatorServer server(server_options(1, port));
  server.start();
  const auto a = joining.get();
  EXPECT_EQ(a->credentials().member_id, "a#1");
  server.stop();
  try {
    MemberClient nobody(member_at(port, "b", 0.3));
    ADD_FAILURE() << "joined a coordinator that is not there";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), Refusal::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("is `loco coordinator` running there?"), std::string::npos) << e.what();
  }
}

TEST(CoordinatorServer, RefusedMessagesGetTheirStatusAndChangeNothing) {
  CoordinatorServer server(server_options(1));
  server.start();
  httplib::Client raw("127.0.0.1", server.port());
  auto post = [&](const std::string& path, const std::string& body) { return raw.Post(path, body, "application/json"); };
  auto malformed = post("/v1/join", "{not json");
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(nlohmann::json::parse(malformed->body).at("refusal"), "malformed");
  EXPECT_EQ(post("/v1/join", R"({"run_id": "test-run"})")->status, 400);  // no name
  EXPECT_EQ(post("/v1/join", R"({"run_id": 7, "name": "x"})")->status, 400);
  auto stranger = post("/v1/join", R"({"run_id": "other-run", "name": "x"})");
  EXPECT_EQ(stranger->status, 403);
  EXPECT_NE(stranger->body.find("other-run"), std::string::npos);
  EXPECT_EQ(post("/v1/heartbeat", R"({"member_id": "x#1", "incarnation": 1})")->status, 409);
  EXPECT_EQ(post("/v1/quorum", R"({"member_id": "x#1"})")->status, 400);
  EXPECT_EQ(post("/v1/join", std::string(100 * 1024, ' '))->status, 413);  // larger than any message
  EXPECT_EQ(nlohmann::json::parse(raw.Get("/status")->body).at("members").size(), 0u);
  EXPECT_THROW(MemberClient(MemberOptions{{"127.0.0.1", server.port()}, "other-run", "x", 2.0, 60, {}}), MembershipError);
}

TEST(CoordinatorServer, ATakenPortIsAClearError) {
  CoordinatorServer server(server_options(1));
  try {
    CoordinatorServer again(server_options(1, server.port()));
    ADD_FAILURE() << "bound a port that is in use";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(server.port())), std::string::npos) << e.what();
  }
}

TEST(CoordinatorAddress, ParsesHostAndPort) {
  EXPECT_EQ(parse_coordinator_address("node0:29400", "LOCO_COORDINATOR").host, "node0");
  EXPECT_EQ(parse_coordinator_address("[::1]:80", "LOCO_COORDINATOR").host, "::1");
  EXPECT_EQ(parse_coordinator_address("10.0.0.2:1", "LOCO_COORDINATOR").port, 1);
  for (const char* bad : {"node0", "node0:", ":29400", "node0:70000", "node0:http", "node0:1.5"}) {
    EXPECT_THROW(parse_coordinator_address(bad, "LOCO_COORDINATOR"), ConfigError) << bad;
  }
}

}  // namespace
}  // namespace loco::membership
