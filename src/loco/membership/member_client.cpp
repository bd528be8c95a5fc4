#include "loco/membership/member_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "loco/membership/authentication.h"
#include "loco/membership/bounded_request.h"
#include "loco/membership/run_settings.h"
#include "loco/membership/wire.h"
#include "loco/monitor/metric_point.h"
#include "loco/util/host_port.h"
#include "loco/util/parse_number.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/signal_name.h"
#include "loco/util/stop_requested.h"

namespace loco::membership {

namespace {

using Clock = std::chrono::steady_clock;

// How much longer than its longest a pass of a long poll must take to be time the process stood still (note
// "stood-still"): a loaded machine's scheduling delays stay well below.
constexpr double kStoodStillS = 10;
constexpr int kStillnessesForgiven = 3;
// A wait a stop may end asks in short requests, so that a stop is seen within their sum even when the coordinator's
// link is silent (a connection never accepted: before, audit round 13, a pass lasted up to 10 s); the leave after it
// asks as briefly (it is best effort: the coordinator expires a member it does not hear).
constexpr double kLongPollWaitS = 5;  // a long poll's wait on the coordinator, a stop not looked for
constexpr double kStoppableWaitS = 2;
constexpr double kStoppableAnswerS = 2;
constexpr double kLeaveRequestS = 2;

struct Answer {
  int status = 0;
  nlohmann::json body;
  std::string text;  // the body as it came, and its MAC (authentication.h)
  std::string mac;
};

// One request on a fresh connection (a connection per call keeps the heartbeat thread and the training
// thread apart), with `mac` as its X-Loco-Mac unless empty. Refusals throw their MembershipError; no answer
// at all is Refusal::unavailable.
Answer post(const CoordinatorAddress& at, const std::string& path, const std::string& body, const std::string& mac,
            double timeout_s) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!mac.empty()) headers.emplace_back(kMacHeader, mac);
  std::string why_not;
  const auto answer = bounded_request(at, "POST", path, headers, body, timeout_s, why_not);
  if (!answer) {
    throw MembershipError(Refusal::unavailable, fmt::format("no answer from the coordinator at {} ({}); is "
                                                            "`loco coordinator` running there?",
                                                            host_port(at.host, at.port), why_not));
  }
  if (answer->status != 200 && answer->status != 202) throw refusal_from(answer->status, answer->body);
  return {answer->status, parse_message(answer->body), answer->body, answer->mac};
}

// Says a long wait, every `every_s` of it: due() is true once per interval.
class WaitReport {
 public:
  explicit WaitReport(double every_s) : start_(Clock::now()), every_s_(every_s), next_s_(every_s) {}
  bool due() {
    if (waited_s() < next_s_) return false;
    next_s_ = waited_s() + every_s_;
    return true;
  }
  double waited_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // How long a long poll may wait before the next report is due (at least 50 ms: no busy loop).
  double seconds_to_next() const { return std::max(0.05, next_s_ - waited_s()); }

 private:
  Clock::time_point start_;
  double every_s_;
  double next_s_;
};

// An answer that does not carry the coordinator's MAC under the session key came from someone who does not
// hold the run's secret: nothing of it is used.
void require_signed(const Answer& answer, const CoordinatorAddress& at, const std::string& key,
                    const std::string& path, std::uint64_t seq) {
  if (!same_mac(answer.mac, reply_mac(key, path, seq, answer.status, answer.text))) {
    throw MembershipError(Refusal::unauthenticated,
                          fmt::format("the answer to {} from {}:{} is not signed with the run's secret: it does not "
                                      "come from this run's coordinator, or the member's secret is not the "
                                      "coordinator's (LOCO_RUN_SECRET_FILE, LOCO_RUN_SECRET)",
                                      path, at.host, at.port));
  }
}

}  // namespace

CoordinatorAddress parse_coordinator_address(const std::string& given, const std::string& what) {
  // A space from a copied line was taken as part of a host name, which then "did not resolve" for the whole
  // join timeout (audit round 14).
  if (std::any_of(given.begin(), given.end(), [](unsigned char c) { return std::isspace(c) || std::iscntrl(c); })) {
    throw ConfigError(fmt::format("{} '{}' holds a space or a control character: write the address alone, as host:port",
                                  what, given));
  }
  // http://host:port/ as a browser shows the coordinator's page names the same address (a scheme in any case).
  std::string text = given;
  std::string scheme = text.substr(0, std::min<std::size_t>(text.size(), 8));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  if (scheme.rfind("http://", 0) == 0) text.erase(0, 7);
  if (!text.empty() && text.back() == '/') text.pop_back();
  if (scheme.rfind("https://", 0) == 0) {
    throw ConfigError(
        fmt::format("{} '{}': the coordinator speaks plain HTTP (every message is authenticated with "
                    "the run's secret, docs/security.md); write its address as host:port",
                    what, given));
  }
  const auto colon = text.rfind(':');
  std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto port = colon == std::string::npos ? std::nullopt : parse_whole_number(text.substr(colon + 1));
  if (host.empty() || !port || *port < 1 || *port > 65535 || *port != static_cast<int>(*port)) {
    throw ConfigError(
        fmt::format("{} '{}' is not host:port (for example coordinator-host:29400, or [::1]:29400)", what, given));
  }
  return {host, static_cast<int>(*port)};
}

struct MemberClient::Shared {
  mutable std::mutex mutex;
  std::condition_variable changed;  // stopping, a rejoin or a fence
  Credentials credentials;
  std::string session_key;  // of these credentials (authentication.h)
  std::uint64_t next_seq = 1;
  int store_port = 0;
  int rejoins = 0;
  std::optional<MembershipError> fence;
  Clock::time_point silent_until{};  // pause_heartbeats
  std::deque<monitor::MetricPoint> reports;  // for the next heartbeats, oldest first
  std::int64_t quorum_id = 0;  // of the last quorum this member was given (0: none since it joined)
  std::int64_t received = 0;   // the serial of the last quorum reply it was given (Coordinator::request_quorum)
};

MemberClient::MemberClient(MemberOptions options) : options_(std::move(options)), shared_(std::make_unique<Shared>()) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.join_timeout_s));
  WaitReport report(options_.report_wait_every_s);
  while (true) {
    stop_if_requested("its coordinator to answer its join");
    try {
      heartbeat_interval_s_ = join();
      break;
    } catch (const MembershipError& e) {
      // Not there yet (started after this member), or too busy to accept the connection: try again.
      if (e.refusal() != Refusal::unavailable || Clock::now() >= deadline) throw;
      if (report.due()) {
        say(
            fmt::format("membership: {} has waited {:.0f} s for its coordinator to answer its join (it tries for "
                        "{:.0f} s): {}",
                        options_.name, report.waited_s(), options_.join_timeout_s, e.what()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  heartbeat_ = std::thread([this] { heartbeat_until_stopped(); });
}

MemberClient::~MemberClient() {
  try {
    leave("process ended");
  } catch (const std::exception&) {
    // Best effort: a coordinator that does not answer expires the member.
  }
}

double MemberClient::join() {
  // Challenge–response (authentication.h): the secret never crosses the wire.
  const Answer challenge = post(options_.coordinator, "/v1/challenge", "{}", "", options_.request_timeout_s);
  const std::string nonce = field<std::string>(challenge.body, "nonce");
  const auto timestamp = static_cast<std::int64_t>(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  const std::string signed_name = signed_join_name(options_.name, options_.place, settings_digest(options_.settings));
  nlohmann::json request = {{"run_id", options_.run_id},
                            {"name", options_.name},
                            {"nonce", nonce},
                            {"timestamp", timestamp},
                            {"mac", join_mac(options_.secret, options_.run_id, signed_name, nonce, timestamp)}};
  if (options_.place.stages > 1) request["pipeline"] = to_json(options_.place);
  if (!options_.settings.empty()) request["settings"] = options_.settings;
  const Answer joined = post(options_.coordinator, "/v1/join", request.dump(), "", options_.request_timeout_s);
  const Credentials credentials = membership::credentials(joined.body);
  const std::string key = session_key(options_.secret, credentials.member_id, credentials.incarnation, nonce);
  require_signed(joined, options_.coordinator, key, "/v1/join", 0);
  const int store_port = static_cast<int>(field<std::int64_t>(joined.body, "store_port"));
  const double interval_s = std::clamp(field<double>(joined.body, "heartbeat_interval_s"), 0.01, 10.0);
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->credentials = credentials;
  shared_->session_key = key;
  shared_->next_seq = 1;
  shared_->store_port = store_port;
  return interval_s;
}

MemberClient::Session MemberClient::session() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return {shared_->credentials, shared_->session_key};
}

MemberClient::Reply MemberClient::post_signed(const std::string& path, nlohmann::json message, const Session& as,
                                              double timeout_s) {
  std::uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    // A session's numbers count up from 1; an old session's requests are refused before their number counts.
    seq = as.key == shared_->session_key ? shared_->next_seq++ : 1;
  }
  message.update(to_json(as.credentials));
  message["seq"] = seq;
  const std::string body = message.dump();
  Answer answer = post(options_.coordinator, path, body, request_mac(as.key, path, body), timeout_s);
  require_signed(answer, options_.coordinator, as.key, path, seq);
  return {answer.status, std::move(answer.body)};
}

Credentials MemberClient::credentials() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->credentials;
}

int MemberClient::store_port() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->store_port;
}

int MemberClient::rejoins() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->rejoins;
}

std::optional<std::string> MemberClient::fenced() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (!shared_->fence) return std::nullopt;
  return std::string(shared_->fence->what());
}

void MemberClient::say(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    loco::print_unchecked(stderr, "{}\n", line);
  }
}

void MemberClient::heartbeat_until_stopped() {
  std::unique_lock<std::mutex> lock(shared_->mutex);
  while (!stopping_ && !shared_->fence) {
    if (Clock::now() < shared_->silent_until) {
      shared_->changed.wait_until(lock, shared_->silent_until, [this] { return stopping_.load(); });
      continue;
    }
    const Session as{shared_->credentials, shared_->session_key};
    std::vector<monitor::MetricPoint> sending = take_reports();
    lock.unlock();
    bool unanswered = false;
    try {
      const Reply beat = post_signed("/v1/heartbeat", heartbeat_message(sending), as, options_.request_timeout_s);
      const auto answered_for = field<std::int64_t>(beat.body, "quorum_id");
      const bool broken = field<bool>(beat.body, "quorum_broken");
      // The answer may have been made before this member was given its current quorum (the request was
      // in flight meanwhile): "broken" then speaks of an earlier quorum and must not make the current
      // one's collectives give up.
      std::lock_guard<std::mutex> guard(shared_->mutex);
      if (answered_for >= shared_->quorum_id) quorum_broken_ = broken;
    } catch (const MembershipError& e) {
      // No answer (the coordinator may be restarting) or an answer that makes no sense: keep beating.
      if (e.refusal() == Refusal::unknown_member || e.refusal() == Refusal::stale_incarnation) rejoin_after(e);
      unanswered = e.refusal() == Refusal::unavailable;
    }
    lock.lock();
    if (unanswered) {
      // Sent again with the next beat, as far as the queue's bound allows. Points a coordinator answered
      // are not: one that refused them (a stricter version) would refuse them again, and the heartbeats too.
      for (auto it = sending.rbegin(); it != sending.rend() && shared_->reports.size() < kMaxQueuedReports; ++it) {
        shared_->reports.push_front(*it);
      }
    }
    shared_->changed.wait_for(lock, std::chrono::duration<double>(heartbeat_interval_s_),
                              [this] { return stopping_.load(); });
  }
}

std::vector<monitor::MetricPoint> MemberClient::take_reports() {
  std::vector<monitor::MetricPoint> taken;
  while (!shared_->reports.empty() && taken.size() < kMaxReportedPoints) {
    taken.push_back(shared_->reports.front());
    shared_->reports.pop_front();
  }
  return taken;
}

nlohmann::json MemberClient::heartbeat_message(const std::vector<monitor::MetricPoint>& points) {
  nlohmann::json message = nlohmann::json::object();
  if (!points.empty()) {
    message["metrics"] = nlohmann::json::array();
    for (const auto& point : points) message["metrics"].push_back(monitor::report_json(point));
  }
  return message;
}

void MemberClient::report(const nlohmann::json& record) {
  const auto point = monitor::point_from_record(record);
  if (!point) return;
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (shared_->reports.size() == kMaxQueuedReports) shared_->reports.pop_front();
  shared_->reports.push_back(*point);
}

void MemberClient::pause_heartbeats(double seconds) {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->silent_until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void MemberClient::rejoin_after(const MembershipError& refusal) {
  const std::string was = credentials().member_id;
  // A stage the coordinator removed went with its replica (a stage of it went): it cannot rejoin alone, and
  // its process starts again. A replacement coordinator (stale_incarnation) broke no replica: it rejoins.
  if (options_.place.stages > 1 && refusal.refusal() == Refusal::unknown_member) {
    say(fmt::format("membership: {} (stage {} of {}) was refused ({}); its pipeline replica must start again", was,
                    options_.place.stage, options_.place.unit, refusal.what()));
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->fence = refusal;
    quorum_broken_ = true;  // its groups' collectives give up now
    shared_->changed.notify_all();
    return;
  }
  try {
    heartbeat_interval_s_ = join();
  } catch (const MembershipError& e) {
    if (e.refusal() == Refusal::unavailable) return;  // the next heartbeat tries again
    say(fmt::format("membership: {} cannot rejoin the run: {}", was, e.what()));
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->fence = e;
    shared_->changed.notify_all();
    return;
  }
  rejoined_since_quorum_ = true;  // whatever this member's quorum was, it is not the run's any more
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->quorum_id = 0;  // a new coordinator may number its quorums (and replies) from 1 again
    shared_->received = 0;
    ++shared_->rejoins;
    shared_->changed.notify_all();
  }
  say(fmt::format("membership: {} was refused ({}); rejoined as {}", was, refusal.what(), credentials().member_id));
}

nlohmann::json MemberClient::long_poll(const std::string& path, nlohmann::json request, double timeout_s,
                                      const std::string& what, bool retry_as_new_member, bool stoppable) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  // Note "stood-still": a pass of the loop lasts at most its request's wait and timeout. One that took far longer
  // is time this process stood still (SIGSTOP, a suspended VM or laptop): the wait goes on with a fresh request
  // and a whole timeout again (before: a member stopped for longer than comm.timeout_s gave up on waking, blaming
  // its coordinator, and the member waiting for it timed out too). At most kStillnessesForgiven times: a pass can
  // also be long for want of an answer to a name lookup, which no deadline bounds.
  auto pass_began = Clock::now();
  double pass_longest_s = 0;
  int stillnesses = 0;
  // What the wait is still for, as a phrase ("1 of the 2 replicas min_replicas asks for"): the coordinator's
  // words, or that it does not answer (before: "still waiting for no answer from the coordinator at …").
  std::string last_reason = "an answer from the coordinator";
  int generation = -1;  // the membership whose credentials the request carries
  Session as;
  WaitReport report(options_.report_wait_every_s);
  const auto forgive_standing_still = [&] {
    const double pass_s = std::chrono::duration<double>(Clock::now() - pass_began).count();
    if (pass_longest_s > 0 && pass_s > pass_longest_s + kStoodStillS && stillnesses < kStillnessesForgiven) {
      ++stillnesses;
      deadline = std::max(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(timeout_s)));
      say(
          fmt::format("membership: {} stood still for {:.0f} s (its process stopped, its machine slept, or a name "
                      "lookup hung); its wait for a {} goes on",
                      as.credentials.member_id, pass_s - pass_longest_s, what));
    }
    pass_began = Clock::now();
  };
  while (true) {
    if (stoppable) stop_if_requested(fmt::format("a {}", what));
    forgive_standing_still();
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      if (shared_->fence) throw *shared_->fence;
      // A request of the old membership keeps its credentials, so that the coordinator refuses it.
      if (generation < 0 || retry_as_new_member) {
        as = {shared_->credentials, shared_->session_key};
        generation = shared_->rejoins;
        // A quorum request says which reply this membership received last: a member that rejoined meanwhile
        // received none from its new coordinator, which may number its replies from 1 again (an old, higher
        // serial would keep a lost answer from being served again: await_quorum).
        if (request.contains("received")) request["received"] = shared_->received;
      }
    }
    if (report.due()) {
      say(fmt::format("membership: {} has waited {:.0f} s for a {} (it gives up after {:.0f} s); still waiting for {}",
                      as.credentials.member_id, report.waited_s(), what, timeout_s, last_reason));
    }
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) break;
    const double wait_s = std::min({left, stoppable ? kStoppableWaitS : kLongPollWaitS, report.seconds_to_next()});
    request["wait_s"] = wait_s;
    const double answer_s =
        stoppable ? std::min(options_.request_timeout_s, kStoppableAnswerS) : options_.request_timeout_s;
    pass_longest_s = wait_s + answer_s + 0.1;  // and the pause after an unanswered request
    try {
      const Reply answer = post_signed(path, request, as, wait_s + answer_s);
      if (answer.status == 200) return answer.body;
      last_reason = answer.body.value("waiting_for", "the coordinator did not say");
    } catch (const MembershipError& e) {
      if (e.refusal() == Refusal::unavailable) {
        last_reason = fmt::format("the coordinator, which does not answer ({})", e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (e.refusal() != Refusal::unknown_member && e.refusal() != Refusal::stale_incarnation) throw;
      // The credentials were refused: the heartbeat thread rejoins (or finds the fence) within a beat. Refused
      // because this process stood still (its heartbeat expired meanwhile), the wait goes on past its old deadline.
      forgive_standing_still();
      std::unique_lock<std::mutex> lock(shared_->mutex);
      shared_->changed.wait_until(lock, deadline, [&] { return shared_->rejoins != generation || shared_->fence; });
      pass_began = Clock::now();  // a wait of its own, not time stood still
      if (shared_->fence) throw *shared_->fence;
      if (!retry_as_new_member || shared_->rejoins == generation) throw;
    }
  }
  const std::string gave_up = fmt::format("no {} within {:.1f} s; still waiting for {}", what, timeout_s, last_reason);
  // Note "gave-up-waiting" (util/stop_requested.h): a wait a stop may end is one training stands in.
  if (stoppable) throw GaveUpWaiting(gave_up);
  throw MembershipError(Refusal::unavailable, gave_up);
}

QuorumReply MemberClient::await_quorum(std::int64_t step, double timeout_s) {
  // "received": the membership's, filled in by long_poll as it sends the request.
  QuorumReply reply =
      quorum_reply(long_poll("/v1/quorum", {{"step", step}, {"received", 0}}, timeout_s, "quorum",
                             /*retry_as_new_member=*/true, /*stoppable=*/true));
  std::lock_guard<std::mutex> lock(shared_->mutex);  // against a heartbeat answer for an earlier quorum
  shared_->quorum_id = reply.quorum_id;
  shared_->received = reply.serial;
  quorum_broken_ = false;
  rejoined_since_quorum_ = false;
  return reply;
}

PipelineReply MemberClient::await_pipeline(double timeout_s) {
  return pipeline_reply(long_poll("/v1/pipeline", nlohmann::json::object(), timeout_s, "member for each stage",
                                  /*retry_as_new_member=*/false, /*stoppable=*/true));
}

CommitReply MemberClient::vote(std::int64_t quorum_id, std::int64_t step, bool ok, const std::string& hash,
                               double timeout_s, const std::vector<std::string>& rejected) {
  nlohmann::json request = {{"quorum_id", quorum_id}, {"step", step}, {"ok", ok}, {"hash", hash}};
  if (!rejected.empty()) request["rejected"] = rejected;
  return commit_reply(long_poll("/v1/commit", request, timeout_s, "commit decision", /*retry_as_new_member=*/false,
                                /*stoppable=*/false));
}

void MemberClient::stop_if_requested(const std::string& waiting_for) const {
  const int signal = options_.stop_requested ? options_.stop_requested() : 0;
  if (signal != 0) throw StopRequested(signal, fmt::format("stopped by {} while waiting for {}", signal_name(signal), waiting_for));
}

void MemberClient::leave(const std::string& reason, bool finished) {
  if (left_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    stopping_ = true;
  }
  shared_->changed.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (fenced()) return;  // the coordinator no longer knows this member
  // The last metrics lines (the run's last step) before the leave, which ends the member's reports.
  std::vector<monitor::MetricPoint> last;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    last = take_reports();
  }
  if (!last.empty()) {
    try {
      post_signed("/v1/heartbeat", heartbeat_message(last), session(),
                  std::min(options_.request_timeout_s, kLeaveRequestS));
    } catch (const MembershipError&) {
      // Best effort, as the leave itself: the coordinator expires a silent member anyway.
    }
  }
  post_signed("/v1/leave", {{"reason", reason}, {"finished", finished}}, session(),
              std::min(options_.request_timeout_s, kLeaveRequestS));
}

}  // namespace loco::membership
