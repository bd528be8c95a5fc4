#include "loco/membership/member_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "loco/membership/wire.h"
#include "loco/util/parse_number.h"

namespace loco::membership {

namespace {

using Clock = std::chrono::steady_clock;

struct Answer {
  int status = 0;
  nlohmann::json body;
};

// One request on a fresh connection (a connection per call keeps the heartbeat thread and the training
// thread apart). Refusals throw their MembershipError; no answer at all is Refusal::unavailable.
Answer post(const CoordinatorAddress& at, const std::string& path, const nlohmann::json& message, double timeout_s) {
  httplib::Client client(at.host, at.port);
  const auto timeout = std::chrono::duration<double>(timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  const auto result = client.Post(path, message.dump(), "application/json");
  if (!result) {
    throw MembershipError(Refusal::unavailable, fmt::format("no answer from the coordinator at {}:{} ({}); is "
                                                            "`loco coordinator` running there?",
                                                            at.host, at.port, httplib::to_string(result.error())));
  }
  if (result->status != 200 && result->status != 202) throw refusal_from(result->status, result->body);
  return {result->status, parse_message(result->body)};
}

}  // namespace

CoordinatorAddress parse_coordinator_address(const std::string& text, const std::string& what) {
  const auto colon = text.rfind(':');
  std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto port = colon == std::string::npos ? std::nullopt : parse_whole_number(text.substr(colon + 1));
  if (host.empty() || !port || *port < 1 || *port > 65535 || *port != static_cast<int>(*port)) {
    throw ConfigError(fmt::format("{} '{}' is not host:port (for example coordinator-host:29400, or [::1]:29400)",
                                  what, text));
  }
  return {host, static_cast<int>(*port)};
}

struct MemberClient::Fence {
  std::mutex mutex;
  std::condition_variable wake;
  std::optional<std::string> reason;
};

MemberClient::MemberClient(MemberOptions options) : options_(std::move(options)), fence_(std::make_unique<Fence>()) {
  const Answer joined = post(options_.coordinator, "/v1/join", {{"run_id", options_.run_id}, {"name", options_.name}},
                             options_.request_timeout_s);
  credentials_ = membership::credentials(joined.body);
  store_port_ = static_cast<int>(field<std::int64_t>(joined.body, "store_port"));
  const double interval_s = std::clamp(field<double>(joined.body, "heartbeat_interval_s"), 0.01, 10.0);
  heartbeat_ = std::thread([this, interval_s] { heartbeat_until_stopped(interval_s); });
}

MemberClient::~MemberClient() {
  try {
    leave("process ended");
  } catch (const std::exception&) {
    // Best effort: a coordinator that does not answer expires the member.
  }
}

void MemberClient::heartbeat_until_stopped(double interval_s) {
  const auto interval = std::chrono::duration<double>(interval_s);
  std::unique_lock<std::mutex> lock(fence_->mutex);
  while (!stopping_) {
    lock.unlock();
    try {
      const Answer beat = post(options_.coordinator, "/v1/heartbeat", to_json(credentials_), options_.request_timeout_s);
      quorum_broken_ = field<bool>(beat.body, "quorum_broken");
    } catch (const MembershipError& e) {
      const Refusal r = e.refusal();
      if (r == Refusal::unknown_member || r == Refusal::stale_incarnation || r == Refusal::wrong_run) {
        std::lock_guard<std::mutex> fenced(fence_->mutex);
        fence_->reason = e.what();
        quorum_broken_ = true;
        return;
      }
      // No answer (the coordinator may be restarting) or an answer that makes no sense: keep beating.
    }
    lock.lock();
    fence_->wake.wait_for(lock, interval, [this] { return stopping_.load(); });
  }
}

std::optional<std::string> MemberClient::fenced() const {
  std::lock_guard<std::mutex> lock(fence_->mutex);
  return fence_->reason;
}

nlohmann::json MemberClient::long_poll(const std::string& path, nlohmann::json request, double timeout_s,
                                      const std::string& what) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string last_reason = "no answer yet";
  while (true) {
    if (const auto reason = fenced()) throw MembershipError(Refusal::unknown_member, *reason);
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) break;
    request["wait_s"] = std::min(left, 5.0);
    try {
      const Answer answer = post(options_.coordinator, path, request, std::min(left, 5.0) + options_.request_timeout_s);
      if (answer.status == 200) return answer.body;
      last_reason = answer.body.value("waiting_for", "the coordinator did not say");
    } catch (const MembershipError& e) {
      if (e.refusal() != Refusal::unavailable) throw;
      last_reason = e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  throw MembershipError(Refusal::unavailable,
                        fmt::format("no {} within {:.1f} s; still waiting for {}", what, timeout_s, last_reason));
}

QuorumReply MemberClient::await_quorum(std::int64_t step, double timeout_s) {
  nlohmann::json request = to_json(credentials_);
  request["step"] = step;
  QuorumReply reply = quorum_reply(long_poll("/v1/quorum", request, timeout_s, "quorum"));
  quorum_broken_ = false;
  return reply;
}

CommitReply MemberClient::vote(std::int64_t quorum_id, std::int64_t step, bool ok, const std::string& hash,
                               double timeout_s) {
  nlohmann::json request = to_json(credentials_);
  request["quorum_id"] = quorum_id;
  request["step"] = step;
  request["ok"] = ok;
  request["hash"] = hash;
  return commit_reply(long_poll("/v1/commit", request, timeout_s, "commit decision"));
}

void MemberClient::leave(const std::string& reason) {
  if (left_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(fence_->mutex);
    stopping_ = true;
  }
  fence_->wake.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (fenced()) return;  // the coordinator no longer knows this member
  nlohmann::json message = to_json(credentials_);
  message["reason"] = reason;
  post(options_.coordinator, "/v1/leave", message, options_.request_timeout_s);
}

}  // namespace loco::membership
