// The coordinator on the network (coordinator_server.h) with real members (member_client.h) on
// loopback: quorums (a lost answer served again), a silent member expiring, a leave seen at once by the
// others' heartbeats (and a late heartbeat answer about an earlier quorum ignored), members rejoining a
// replacement coordinator or after being expelled, another run's coordinator fencing them for good, and
// refused messages.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "loco/membership/authentication.h"
#include "loco/membership/coordinator_server.h"
#include "loco/membership/member_client.h"
#include "loco/membership/status_client.h"
#include "loco/membership/wire.h"
#include "loco/util/stop_requested.h"

namespace loco::membership {
namespace {

using Clock = std::chrono::steady_clock;
using Ids = std::vector<std::string>;

const std::string kSecret = "the-test-run-secret";

ServerOptions server_options(int min_replicas, int port = 0) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.coordinator.rules = {min_replicas, /*start_replicas=*/0, /*heartbeat_timeout_s=*/1.0, /*join_window_s=*/0.5};
  o.coordinator.run_id = "test-run";
  o.coordinator.incarnation = new_incarnation();
  o.secret = kSecret;
  o.heartbeat_interval_s = 0.05;
  o.log = [](const std::string&) {};
  return o;
}

MemberOptions member_at(int port, const std::string& name, double join_timeout_s = 60,
                        const std::string& secret = kSecret) {
  MemberOptions options;
  options.coordinator = {"127.0.0.1", port};
  options.run_id = "test-run";
  options.secret = secret;
  options.name = name;
  options.request_timeout_s = 2.0;
  options.join_timeout_s = join_timeout_s;
  options.log = [](const std::string&) {};
  return options;
}

MemberOptions member(const CoordinatorServer& server, const std::string& name) { return member_at(server.port(), name); }

// A join made by hand (authentication.h): a challenge, then its answer with the run's secret. Returns the
// join's body, so that a test can send it again.
nlohmann::json join_by_hand(httplib::Client& raw, const std::string& name, int expected_status = 200) {
  const std::string nonce =
      nlohmann::json::parse(raw.Post("/v1/challenge", "{}", "application/json")->body).at("nonce");
  const auto stamp = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  const nlohmann::json join = {{"run_id", "test-run"}, {"name", name}, {"nonce", nonce}, {"timestamp", stamp},
                               {"mac", join_mac(kSecret, "test-run", name, nonce, stamp)}};
  EXPECT_EQ(raw.Post("/v1/join", join.dump(), "application/json")->status, expected_status);
  return join;
}

// The run's whole status (with the status token).
nlohmann::json full_status(httplib::Client& raw) {
  return nlohmann::json::parse(raw.Get("/status", {{kStatusTokenHeader, status_token(kSecret, "test-run")}})->body);
}

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
  join_by_hand(raw, "stopped");
  MemberClient a(member(server, "a"));
  const auto start = Clock::now();
  const QuorumReply q = a.await_quorum(0, 10);  // 1 of 2 healthy members is no majority until "stopped" expires
  const double waited = seconds_since(start);
  EXPECT_EQ(q.members, (Ids{"a#1"}));
  EXPECT_GT(waited, 0.5);  // it had to expire first (heartbeat timeout 1 s)
  EXPECT_LT(waited, 8.0);  // and nothing else held it (a long poll lasts up to 5 s)
  const auto status = full_status(raw);
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

// Between a member and its coordinator: passes every request on and its answer back as it came (the
// answers' MACs do not name an address), except that once hold_heartbeats() is called it keeps each
// heartbeat answer until release_one() (the request itself reaches the coordinator at once), and that
// after lose_next_quorum_answer() the next answer to /v1/quorum is lost: the member gets a 502 instead.
class InterceptingProxy {
 public:
  explicit InterceptingProxy(int coordinator_port) : coordinator_port_(coordinator_port) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) { pass_on(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~InterceptingProxy() {
    stop_holding();
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }
  void hold_heartbeats() {
    std::lock_guard<std::mutex> lock(mutex_);
    holding_ = true;
  }
  // Waits until an answer is held, and returns its body.
  std::string held_answer() {
    std::unique_lock<std::mutex> lock(mutex_);
    EXPECT_TRUE(changed_.wait_for(lock, std::chrono::seconds(10), [this] { return !held_.empty(); }));
    return held_;
  }
  // Lets the held answer go on; the member sends its next heartbeat only after it acted on this one.
  void release_one() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.clear();
    ++released_;
    changed_.notify_all();
  }
  void lose_next_quorum_answer() {
    std::lock_guard<std::mutex> lock(mutex_);
    losing_ = true;
  }
  // The answers lost so far.
  std::vector<std::string> lost_answers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lost_;
  }
  void stop_holding() {
    std::lock_guard<std::mutex> lock(mutex_);
    holding_ = false;
    changed_.notify_all();
  }

 private:
  void pass_on(const httplib::Request& req, httplib::Response& res) {
    httplib::Client coordinator("127.0.0.1", coordinator_port_);
    coordinator.set_read_timeout(std::chrono::seconds(10));
    httplib::Headers headers;
    if (req.has_header("X-Loco-Mac")) headers.emplace("X-Loco-Mac", req.get_header_value("X-Loco-Mac"));
    const auto answer = coordinator.Post(req.path, headers, req.body, "application/json");
    if (!answer) {
      res.status = 502;
      return;
    }
    if (req.path == "/v1/quorum" && answer->status == 200) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (losing_) {
        losing_ = false;
        lost_.push_back(answer->body);
        res.status = 502;
        return;
      }
    }
    if (req.path == "/v1/heartbeat") {
      std::unique_lock<std::mutex> lock(mutex_);
      if (holding_) {
        changed_.wait(lock, [&] { return held_.empty(); });  // one at a time
        const int ticket = released_;
        held_ = answer->body;
        changed_.notify_all();
        changed_.wait(lock, [&] { return released_ > ticket || !holding_; });
      }
    }
    res.status = answer->status;
    if (answer->has_header("X-Loco-Mac")) res.set_header("X-Loco-Mac", answer->get_header_value("X-Loco-Mac"));
    res.set_content(answer->body, "application/json");
  }

  int coordinator_port_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool holding_ = false;
  std::string held_;
  int released_ = 0;
  bool losing_ = false;
  std::vector<std::string> lost_;
};

// A member whose quorum answer is lost on the way asks again, saying which reply it received last: it is
// given the same quorum at once, and meets the others in its group (before, it waited for a new quorum
// while they waited for it, until their rendezvous timed out).
TEST(CoordinatorServer, AQuorumAnswerLostOnTheWayIsServedAgain) {
  CoordinatorServer server(server_options(2));
  server.start();
  InterceptingProxy proxy(server.port());
  MemberClient a(member_at(proxy.port(), "a"));
  MemberClient b(member(server, "b"));
  for (const std::int64_t step : {0, 10}) {  // the first reply, and one after a received reply
    proxy.lose_next_quorum_answer();
    auto qb = std::async(std::launch::async, [&] { return b.await_quorum(step, 10); });
    const auto asked = Clock::now();
    const QuorumReply qa = a.await_quorum(step, 10);
    const QuorumReply rb = qb.get();
    EXPECT_LT(seconds_since(asked), 5.0);  // not a new quorum's wait (b is not asking any more)
    ASSERT_EQ(proxy.lost_answers().size(), step == 0 ? 1u : 2u);
    const QuorumReply lost = quorum_reply(nlohmann::json::parse(proxy.lost_answers().back()));
    EXPECT_EQ(qa.serial, lost.serial);
    EXPECT_EQ(qa.store_prefix, rb.store_prefix);
    EXPECT_EQ(qa.members, rb.members);
    EXPECT_EQ(qa.rank, 0);
    EXPECT_EQ(qa.steps, (std::vector<std::int64_t>{step, step}));
  }
  // The coordinator formed one quorum, not a second for the lost answer's repeated request.
  httplib::Client raw("127.0.0.1", server.port());
  const nlohmann::json status = full_status(raw);
  EXPECT_EQ(status.at("quorum").at("id"), 1) << status.dump(2);
  EXPECT_FALSE(status.at("quorum").at("broken").get<bool>());
}

// A member asks for a quorum while its coordinator is replaced: it rejoins meanwhile and asks again as the new
// member, which received no reply from the replacement (whose replies are numbered from 1 again). When the
// replacement's answer is lost on the way, it is served again at once. (Before, the request still carried the
// serial of the first coordinator's last reply, higher than the lost one's: the member waited for a new quorum
// that never formed while the other waited for it in their group.)
TEST(CoordinatorServer, AQuorumAnswerLostAfterTheCoordinatorWasReplacedIsServedAgain) {
  auto first = std::make_unique<CoordinatorServer>(server_options(2));
  const int port = first->port();
  first->start();
  InterceptingProxy proxy(port);
  MemberClient a(member_at(proxy.port(), "a"));
  MemberClient b(member(*first, "b"));
  for (const std::int64_t step : {0, 10, 20}) {  // a receives the first coordinator's replies
    auto qb = std::async(std::launch::async, [&] { return b.await_quorum(step, 10); });
    a.await_quorum(step, 10);
    qb.get();
  }
  proxy.lose_next_quorum_answer();
  auto qa = std::async(std::launch::async, [&] { return a.await_quorum(30, 20); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a waits for b at the first coordinator
  first.reset();
  CoordinatorServer second(server_options(2, port));
  second.start();
  ASSERT_TRUE(eventually([&] { return a.rejoins() == 1 && b.rejoins() == 1; }));
  const auto asked = Clock::now();
  const QuorumReply rb = b.await_quorum(30, 20);
  const QuorumReply ra = qa.get();
  EXPECT_LT(seconds_since(asked), 5.0);  // served again, not a new quorum's wait
  ASSERT_EQ(proxy.lost_answers().size(), 1u);
  EXPECT_EQ(ra.serial, quorum_reply(nlohmann::json::parse(proxy.lost_answers().back())).serial);
  EXPECT_EQ(ra.members, rb.members);
  EXPECT_EQ(ra.store_prefix, rb.store_prefix);
}

// A heartbeat answer made while the member's quorum was broken, that reaches the member only after it was
// given its next quorum, speaks of the old quorum: it must not mark the new one broken (whose collectives
// would then give up at once). Once seen as a rare failure of a pipeline test under load.
TEST(CoordinatorServer, AHeartbeatAnswerForAnEarlierQuorumDoesNotBreakTheCurrentOne) {
  ServerOptions options = server_options(1);
  options.coordinator.rules.heartbeat_timeout_s = 30;  // a held heartbeat is no silence
  CoordinatorServer server(options);
  server.start();
  InterceptingProxy proxy(server.port());
  MemberClient a(member_at(proxy.port(), "a"));
  MemberClient b(member(server, "b"));
  auto qb = std::async(std::launch::async, [&] { return b.await_quorum(0, 10); });
  const QuorumReply q1 = a.await_quorum(0, 10);
  qb.get();
  proxy.hold_heartbeats();
  b.leave("preempted");
  // Answers made before the leave say "not broken"; let them go until one made after it is held.
  int passed = 0;
  while (proxy.held_answer().find("\"quorum_broken\":true") == std::string::npos) {
    ASSERT_LT(++passed, 100) << "no heartbeat answer said the quorum was broken";
    proxy.release_one();
  }
  const QuorumReply q2 = a.await_quorum(0, 10);
  EXPECT_GT(q2.quorum_id, q1.quorum_id);
  EXPECT_FALSE(a.quorum_broken());
  proxy.release_one();
  proxy.held_answer();  // the next heartbeat: the member has acted on the old answer
  EXPECT_FALSE(a.quorum_broken()) << "an answer about quorum " << q1.quorum_id << " broke quorum " << q2.quorum_id;
  proxy.stop_holding();
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

// A member that waits long (for its coordinator, for a quorum) says so, with what it waits for, every
// report_wait_every_s: a member waiting for comm.timeout_s does not look hung.
TEST(CoordinatorServer, AWaitingMemberSaysWhatItWaitsForAtIntervals) {
  std::mutex mutex;
  std::vector<std::string> lines;
  auto saying = [&](MemberOptions options) {
    options.report_wait_every_s = 0.3;
    options.log = [&](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
    return options;
  };
  auto said = [&](const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& line) { return line.find(text) != std::string::npos; });
  };
  int port = 0;
  {
    CoordinatorServer probe(server_options(1));  // a port that was free a moment ago
    port = probe.port();
    probe.start();
  }
  EXPECT_THROW(MemberClient(saying(member_at(port, "a", 2.0))), MembershipError);
  EXPECT_GE(said("membership: a has waited"), 2);
  EXPECT_GE(said("for its coordinator to answer its join (it tries for 2 s): no answer from the coordinator at "
                 "127.0.0.1:" +
                 std::to_string(port)),
            2);

  CoordinatorServer server(server_options(2));
  server.start();
  MemberClient b(saying(member(server, "b")));
  EXPECT_THROW(b.await_quorum(0, 2.0), GaveUpWaiting);  // note "gave-up-waiting": training checkpoints first
  EXPECT_GE(said("membership: b#1 has waited"), 2);
  EXPECT_GE(said("for a quorum (it gives up after 2 s); still waiting for 1 of the 2 replicas min_replicas asks for"),
            2);
  // At intervals, not at every try or poll: at most one line per 0.3 s of the 2 s waits.
  EXPECT_LE(said("membership: a has waited"), 7);
  EXPECT_LE(said("membership: b#1 has waited"), 7);
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
  auto stranger = post("/v1/join", R"({"run_id": "other-run", "name": "x", "nonce": "00", "timestamp": 0, "mac": ""})");
  EXPECT_EQ(stranger->status, 403);
  EXPECT_NE(stranger->body.find("other-run"), std::string::npos);
  EXPECT_EQ(post("/v1/heartbeat", R"({"member_id": "x#1", "incarnation": 1})")->status, 409);
  EXPECT_EQ(post("/v1/quorum", R"({"member_id": "x#1"})")->status, 400);
  EXPECT_EQ(post("/v1/join", std::string(100 * 1024, ' '))->status, 413);  // larger than any message
  EXPECT_EQ(nlohmann::json::parse(raw.Get("/status")->body).at("members").at("joined"), 0);
  MemberOptions other_run = member_at(server.port(), "x");
  other_run.run_id = "other-run";
  EXPECT_THROW(MemberClient{other_run}, MembershipError);
}

// Without the run's secret nothing gets in (docs/security.md): a member with another secret is refused at its
// join and told which variable to fix; a join replayed is refused; messages with a member's credentials but
// without its session's MAC change nothing; /status and / show members only to the status token.
// loco status's reading (status_client.h): the members and events with the run's secret, refused without it.
TEST(CoordinatorServer, TheStatusClientReadsMembersWithTheSecretOnly) {
  CoordinatorServer server(server_options(1));
  server.start();
  MemberClient a(member(server, "alpha"));
  const CoordinatorAddress at{"127.0.0.1", server.port()};
  const nlohmann::json status = run_status(at, kSecret, 5);
  ASSERT_EQ(status.at("members").size(), 1u);
  EXPECT_EQ(status.at("members")[0].at("id"), a.credentials().member_id);
  const std::string table = format_status(status, 5);
  EXPECT_NE(table.find("run test-run"), std::string::npos) << table;
  EXPECT_NE(table.find(a.credentials().member_id), std::string::npos) << table;
  EXPECT_NE(table.find("last events:"), std::string::npos) << table;
  try {
    run_status(at, "another-secret-entirely", 5);
    ADD_FAILURE() << "the status token of another secret was taken";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), Refusal::unauthenticated) << e.what();
  }
  EXPECT_THROW(run_status({"127.0.0.1", 1}, kSecret, 1), MembershipError);  // nothing listens on port 1
}

TEST(CoordinatorServer, OnlyHoldersOfTheSecretTakePart) {
  CoordinatorServer server(server_options(1));
  server.start();
  try {
    MemberClient stranger(member_at(server.port(), "x", 5, "another-secret-entirely"));
    ADD_FAILURE() << "joined without the run's secret";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), Refusal::unauthenticated) << e.what();
    EXPECT_NE(std::string(e.what()).find("LOCO_RUN_SECRET_FILE"), std::string::npos) << e.what();
  }
  MemberClient a(member(server, "a"));
  httplib::Client raw("127.0.0.1", server.port());
  auto post = [&](const std::string& path, const nlohmann::json& body, const httplib::Headers& headers = {}) {
    return raw.Post(path, headers, body.dump(), "application/json");
  };
  const nlohmann::json join = join_by_hand(raw, "b");
  const auto replayed = post("/v1/join", join);
  EXPECT_EQ(replayed->status, 401);
  EXPECT_NE(replayed->body.find("answers no challenge"), std::string::npos) << replayed->body;
  // a#1's credentials, without (or with a forged) session MAC: refused, a stays in the run.
  const Credentials who = a.credentials();
  const nlohmann::json leave = {{"member_id", who.member_id}, {"incarnation", who.incarnation}, {"seq", 999},
                                {"reason", "forged"}};
  // The refusal is the one an id that is no member gets (410, word for word): it tells nobody who exists.
  EXPECT_EQ(post("/v1/leave", leave)->status, 410);
  const std::string forged_key =
      session_key("another-secret-entirely", who.member_id, who.incarnation, join.at("nonce").get<std::string>());
  const auto forged = post("/v1/leave", leave, {{kMacHeader, request_mac(forged_key, "/v1/leave", leave.dump())}});
  EXPECT_EQ(forged->status, 410);
  nlohmann::json stranger = leave;
  stranger["member_id"] = "nobody#1";
  const auto unknown = post("/v1/leave", stranger, {{kMacHeader, request_mac(forged_key, "/v1/leave", stranger.dump())}});
  EXPECT_EQ(unknown->status, 410);
  std::string expected = unknown->body;
  expected.replace(expected.find("nobody#1"), 8, who.member_id);
  EXPECT_EQ(forged->body, expected);
  EXPECT_EQ(raw.Get("/status")->body.find("a#1"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(raw.Get("/status")->body).at("members").at("joined"), 2);
  EXPECT_EQ(full_status(raw).at("members").at(0).at("id"), "a#1");
  EXPECT_EQ(raw.Get("/")->body.find("a#1"), std::string::npos);
  EXPECT_NE(raw.Get("/?token=" + status_token(kSecret, "test-run"))->body.find("/dashboard.js"), std::string::npos);
  EXPECT_NE(raw.Get("/status?token=" + status_token(kSecret, "test-run"))->body.find("a#1"), std::string::npos);
  // a goes on: once b (which never heartbeats) expires, a quorum of a alone forms.
  EXPECT_EQ(a.await_quorum(0, 10).members, Ids{"a#1"});
}

// The dashboard (docs/dashboard.md): a member's metrics lines reach the coordinator with its heartbeats and
// are served to holders of the status token only, with headers that keep the page to its own server; a
// heartbeat whose metrics are malformed is refused and changes nothing.
TEST(CoordinatorServer, MembersReportTheirMetricsToTheDashboard) {
  CoordinatorServer server(server_options(1));
  server.start();
  MemberClient a(member(server, "alpha"));
  a.report(nlohmann::json::parse(R"({"step": 10, "loss": 6.5, "tokens_per_s": 1000, "lr": 0.1})"));
  a.report(nlohmann::json::parse(R"({"step": 20, "loss": 6.0, "eval_loss": 6.25})"));
  a.report(nlohmann::json::parse(R"({"no step": true})"));  // not a point: dropped
  httplib::Client raw("127.0.0.1", server.port());
  const httplib::Headers token = {{kStatusTokenHeader, status_token(kSecret, "test-run")}};
  ASSERT_TRUE(eventually([&] {
    const auto history = nlohmann::json::parse(raw.Get("/history?after=0", token)->body);
    return !history.at("series").empty() && history["series"][0]["step"].size() == 2;
  }));
  const auto history = nlohmann::json::parse(raw.Get("/history", token)->body);
  EXPECT_EQ(history["series"][0]["name"], "alpha");
  EXPECT_EQ(history["series"][0]["loss"], nlohmann::json::parse("[6.5, 6.0]"));
  EXPECT_EQ(history["series"][0]["eval_loss"], nlohmann::json::parse("[null, 6.25]"));
  EXPECT_EQ(full_status(raw).at("members").at(0).at("metrics").at("eval_loss"), 6.25);
  const std::string table = format_status(run_status({"127.0.0.1", server.port()}, kSecret, 5), 5);
  EXPECT_NE(table.find("6.0000"), std::string::npos) << table;  // loco status shows the last loss
  // Without the token: no history, no names (not even of members gone); a position that is no number is a 400.
  a.leave("done");
  EXPECT_EQ(raw.Get("/status")->body.find("alpha"), std::string::npos) << raw.Get("/status")->body;
  EXPECT_EQ(full_status(raw).at("former_members").at(0).at("name"), "alpha");
  const auto refused = raw.Get("/history?after=0");
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(refused->body.find("alpha"), std::string::npos);
  EXPECT_EQ(raw.Get("/history?after=-1", token)->status, 400);
  // The page's files come from this server only, and say so to the browser.
  for (const char* path : {"/dashboard.js", "/dashboard.css", "/status", "/"}) {
    const auto answer = raw.Get(path);
    ASSERT_EQ(answer->status, 200) << path;
    EXPECT_NE(answer->get_header_value("Content-Security-Policy").find("default-src 'none'"), std::string::npos) << path;
    EXPECT_EQ(answer->get_header_value("Referrer-Policy"), "no-referrer") << path;
  }
  EXPECT_NE(raw.Get("/dashboard.js")->body.find("textContent"), std::string::npos);

  // A hand-made member whose heartbeat carries a malformed point: 400, nothing kept.
  const std::string nonce = nlohmann::json::parse(raw.Post("/v1/challenge", "{}", "application/json")->body).at("nonce");
  const auto stamp = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  const nlohmann::json join = {{"run_id", "test-run"}, {"name", "bravo"}, {"nonce", nonce}, {"timestamp", stamp},
                               {"mac", join_mac(kSecret, "test-run", "bravo", nonce, stamp)}};
  const auto joined = nlohmann::json::parse(raw.Post("/v1/join", join.dump(), "application/json")->body);
  const std::string id = joined.at("member_id");
  const auto incarnation = joined.at("incarnation").get<std::uint64_t>();
  const std::string key = session_key(kSecret, id, incarnation, nonce);
  std::uint64_t seq = 0;
  auto beat = [&](const nlohmann::json& metrics) {
    const nlohmann::json body = {{"member_id", id}, {"incarnation", incarnation}, {"seq", ++seq}, {"metrics", metrics}};
    return raw.Post("/v1/heartbeat", {{kMacHeader, request_mac(key, "/v1/heartbeat", body.dump())}}, body.dump(),
                    "application/json");
  };
  const auto bad_value = beat(nlohmann::json::parse(R"([{"step": 5, "loss": "NaN"}])"));
  EXPECT_EQ(bad_value->status, 400);
  EXPECT_NE(nlohmann::json::parse(bad_value->body).at("error").get<std::string>().find("\"loss\" is not a finite number"),
            std::string::npos)
      << bad_value->body;
  EXPECT_EQ(beat(nlohmann::json(std::vector<nlohmann::json>(kMaxReportedPoints + 1, {{"step", 1}})))->status, 400);
  EXPECT_EQ(beat(nlohmann::json::parse(R"({"step": 5})"))->status, 400);
  EXPECT_EQ(beat(nlohmann::json::parse(R"([{"step": 5, "loss": 1.5}])"))->status, 200);
  const auto kept = nlohmann::json::parse(raw.Get("/history", token)->body);
  ASSERT_EQ(kept.at("series").size(), 2u);
  EXPECT_EQ(kept["series"][1]["name"], "bravo");
  EXPECT_EQ(kept["series"][1]["step"], nlohmann::json::parse("[5]"));
}

// A coordinator that does not hold the secret cannot pass for the run's: its answer to the join is not
// signed with it, and the member refuses to go on.
TEST(CoordinatorServer, AMemberRefusesACoordinatorWithoutTheSecret) {
  httplib::Server fake;
  fake.Post("/v1/challenge", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"nonce": "00"})", "application/json");
  });
  fake.Post("/v1/join", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"member_id": "a#1", "incarnation": 5, "heartbeat_interval_s": 0.1,
                        "heartbeat_timeout_s": 1, "store_port": 0})",
                    "application/json");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { fake.listen_after_bind(); });
  try {
    MemberClient a(member_at(port, "a", 5));
    ADD_FAILURE() << "joined a coordinator that does not hold the secret";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), Refusal::unauthenticated) << e.what();
    EXPECT_NE(std::string(e.what()).find("is not signed with the run's secret"), std::string::npos) << e.what();
  }
  fake.stop();
  serving.join();
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

}  // namespace
}  // namespace loco::membership
