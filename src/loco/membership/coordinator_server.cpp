#include "loco/membership/coordinator_server.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "loco/http/http_server.h"
#include "loco/membership/authentication.h"
#include "loco/membership/membership_error.h"
#include "loco/membership/run_settings.h"
#include "loco/membership/untrusted_text.h"
#include "loco/membership/wire.h"
#include "loco/monitor/dashboard_routes.h"
#include "loco/util/host_port.h"
#include "loco/util/print_unchecked.h"

namespace loco::membership {

namespace {

using Clock = std::chrono::steady_clock;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpServer;
using http::HttpServerLimits;

constexpr std::size_t kMaxMessageBytes = 64 * 1024;  // every message is a few hundred bytes

HttpServerLimits coordinator_limits() {
  HttpServerLimits limits;
  limits.max_body_bytes = kMaxMessageBytes;
  // Every member holds a few requests at once (a heartbeat, a quorum's or a vote's long poll): room for runs
  // of a thousand members and more.
  limits.max_answering_connections = 4096;
  return limits;
}

int http_status(Refusal refusal) {
  switch (refusal) {
    case Refusal::malformed: return 400;
    case Refusal::wrong_run: return 403;
    case Refusal::stale_incarnation: return 409;
    case Refusal::stale_quorum: return 409;
    case Refusal::unknown_member: return 410;
    case Refusal::unavailable: return 503;
    case Refusal::unauthenticated: return 401;
    case Refusal::barred: return 403;
  }
  return 500;
}

// What anyone may read of a run (no member ids, names, metrics or events): its progress and counts. Only the
// fields named here are copied, so that whatever the full status gains stays behind the token.
nlohmann::json public_status(const nlohmann::json& status) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* open : {"run_id", "furthest_step", "finished", "incarnation", "time_s", "rules", "waiting_for"}) {
    out[open] = status.at(open);
  }
  const nlohmann::json& members = status.at("members");
  std::size_t healthy = 0, waiting = 0;
  for (const auto& m : members) {
    healthy += m.at("healthy").get<bool>() ? 1 : 0;
    waiting += m.at("waiting_s").is_null() ? 0 : 1;
  }
  out["members"] = {{"joined", members.size()}, {"healthy", healthy}, {"waiting", waiting}};
  out["quorum"] = {{"id", status.at("quorum").at("id")},
                   {"size", status.at("quorum").at("members").size()},
                   {"broken", status.at("quorum").at("broken")}};
  out["hidden"] = "members and events: send the run's status token (X-Loco-Token, or ?token=; docs/security.md)";
  return out;
}

// The page for whoever lacks the status token: the run's counts. Its run id is escaped (a refused run id is
// what a sender wrote).
std::string public_page(const nlohmann::json& status) {
  const nlohmann::json& members = status.at("members");
  return fmt::format(
      "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\">"
      "<title>loco run {0}</title></head><body><h1>loco run {0}</h1>"
      "<p>coordinator incarnation {1}; quorum q{2} of {3} members; {4} members joined, {5} healthy, {6} waiting; "
      "furthest step {7}{8}</p><p>Members, their metrics and events are shown to holders of the run's secret: open "
      "the address <code>loco coordinator</code> wrote on its terminal, <code>/?token=TOKEN</code> "
      "(docs/dashboard.md)</p></body></html>\n",
      html_escaped(status.at("run_id").get<std::string>()), status.at("incarnation").get<std::uint64_t>(),
      status.at("quorum").at("id").get<std::int64_t>(), status.at("quorum").at("size").get<std::size_t>(),
      members.at("joined").get<std::size_t>(), members.at("healthy").get<std::size_t>(),
      members.at("waiting").get<std::size_t>(), status.at("furthest_step").get<std::int64_t>(),
      status.at("finished").get<bool>() ? " (finished)" : "");
}

// The status token of a request: its X-Loco-Token header, or ?token= (a browser's address).
std::string status_token_of(const HttpRequest& request) {
  std::string token = request.header(kStatusTokenHeader);
  return token.empty() ? request.query_parameter("token").value_or("") : token;
}

}  // namespace

std::uint64_t new_incarnation() {
  std::random_device device;
  std::uint64_t value = 0;
  while (value == 0) value = (static_cast<std::uint64_t>(device()) << 32 | device()) >> 1;
  return value;
}

struct CoordinatorServer::Impl {
  ServerOptions options;
  Coordinator coordinator;
  Authenticator authenticator;  // guarded by mutex, as coordinator
  HttpServer http{coordinator_limits()};
  int port = 0;
  const Clock::time_point started = Clock::now();
  std::mutex mutex;  // guards coordinator
  std::condition_variable changed;
  bool stopping = false;
  std::thread ticker, server_thread;

  explicit Impl(ServerOptions o)
      : options(with_logs(std::move(o))),
        coordinator(options.coordinator),
        authenticator(options.secret, options.coordinator.run_id, options.coordinator.incarnation) {
    LOCO_CHECK(!options.secret.empty(), "a coordinator needs the run's secret");
  }

  // stderr unless told otherwise; every event of the coordinator (joins, expiries, quorums, decisions) is
  // one line of the log, escaped (untrusted_text.h): what a sender wrote cannot start a line of its own.
  static ServerOptions with_logs(ServerOptions o) {
    if (!o.log) o.log = [](const std::string& line) { loco::print_unchecked(stderr, "{}\n", line); };
    o.log = [write = std::move(o.log)](const std::string& line) { write(loggable(line)); };
    if (!o.coordinator.on_event) {
      o.coordinator.on_event = [log = o.log](const std::string& kind, const std::string& detail) {
        log(fmt::format("loco coordinator: {} {}", kind, detail));
      };
    }
    return o;
  }

  double now() const { return std::chrono::duration<double>(Clock::now() - started).count(); }

  // The coordinator's time for a tick, under the lock. Ticks come at least every kTickInterval (tick_until_stopped):
  // a longer gap means the coordinator itself did not run (SIGSTOP, a paused VM), and the members' heartbeats of
  // that time are still unread, so the gap is excused (Coordinator::excuse_stall) before anyone is expired for it:
  // before, a healthy member was expelled on waking, whichever heartbeat was read first.
  double tick_time() {
    const double at = now();
    if (last_tick >= 0 && at - last_tick > kStallSeconds) coordinator.excuse_stall(at, at - last_tick);
    last_tick = at;
    return at;
  }
  static constexpr std::chrono::milliseconds kTickInterval{50};
  static constexpr double kStallSeconds = 1.0;  // 20 ticks missed: no busy machine delays one that long
  double last_tick = -1;

  // What a handler works with: the lock on the coordinator, the answer's status, and the session key that
  // signs the answer (authentication.h).
  struct Context {
    std::unique_lock<std::mutex>& lock;
    int status = 200;
    std::optional<std::string> key = std::nullopt;
    std::uint64_t seq = 0;
  };
  using Handler = std::function<nlohmann::json(const nlohmann::json&, Context&)>;

  // Runs `handle` on the parsed body under the lock. A member's message (`from_member`) proves its session
  // first (the credentials must be current, then the MAC and the sequence number), and the answer carries
  // the coordinator's MAC. A refusal becomes its status and a log line; nothing of it is applied.
  void reply(const HttpRequest& request, HttpResponse& response, bool from_member, const Handler& handle) {
    std::unique_lock<std::mutex> lock(mutex, std::defer_lock);
    Context context{lock};
    std::string body;
    try {
      const nlohmann::json message = parse_message(request.body);
      lock.lock();
      if (from_member) {
        const Credentials who = credentials(message);
        // A member of an earlier incarnation rejoins (the incarnation is public); then the session's MAC,
        // whose refusal is the same for unknown and known ids, before anything says whether `who` exists.
        coordinator.require_incarnation(who);
        const auto seq = field<std::uint64_t>(message, "seq");
        authenticator.check_request(who.member_id, request.path, request.body, seq, request.header(kMacHeader));
        coordinator.require_member(who);
        context.key = authenticator.key_of(who.member_id);
        context.seq = seq;
      }
      body = handle(message, context).dump();
    } catch (const MembershipError& e) {
      options.log(fmt::format("loco coordinator: refused {} from {}: {}", request.path, request.remote_addr, e.what()));
      context.status = http_status(e.refusal());
      body = refusal_message(e).dump();
    }
    if (lock.owns_lock()) lock.unlock();
    changed.notify_all();
    response.status = context.status;
    if (context.key) {
      response.headers.emplace_back(kMacHeader, reply_mac(*context.key, request.path, context.seq, context.status, body));
    }
    response.body = std::move(body);
  }

  // GET /status and / in full for holders of the status token; aggregate numbers for anyone else.
  nlohmann::json visible_status(const HttpRequest& request) {
    std::lock_guard<std::mutex> lock(mutex);
    const nlohmann::json status = coordinator.status(now());
    return authenticator.status_token_ok(status_token_of(request)) ? status : public_status(status);
  }

  double wall_now() const {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  void routes() {
    http.route("POST", "/v1/challenge", [this](const HttpRequest& req, HttpResponse& res) {
      reply(req, res, false, [this](const nlohmann::json&, Context&) {
        return nlohmann::json{{"nonce", authenticator.challenge(now())}};
      });
    });
    http.route("POST", "/v1/join", [this](const HttpRequest& req, HttpResponse& res) {
      reply(req, res, false, [this](const nlohmann::json& body, Context& context) {
        const auto run_id = field<std::string>(body, "run_id");
        coordinator.require_run(run_id);  // another run's member is told so, and stops trying
        const auto name = field<std::string>(body, "name"), nonce = field<std::string>(body, "nonce");
        const PipelinePlace place = pipeline_place(body);
        const nlohmann::json settings = join_settings(body);
        authenticator.admit(signed_join_name(name, place, settings_digest(settings)), nonce,
                            field<std::int64_t>(body, "timestamp"), field<std::string>(body, "mac"), wall_now(), now());
        const JoinReply joined = coordinator.join(run_id, name, now(), place, settings);
        for (const std::string& gone : coordinator.former_members(authenticator.members())) {
          authenticator.close_session(gone);
        }
        context.key = authenticator.open_session(joined.member_id, nonce);
        return nlohmann::json{{"member_id", joined.member_id},
                              {"incarnation", joined.incarnation},
                              {"heartbeat_interval_s", options.heartbeat_interval_s},
                              {"heartbeat_timeout_s", options.coordinator.rules.heartbeat_timeout_s},
                              {"store_port", options.store_port}};
      });
    });
    http.route("POST", "/v1/heartbeat", [this](const HttpRequest& req, HttpResponse& res) {
      reply(req, res, true, [this](const nlohmann::json& body, Context&) {
        const HeartbeatReply beat = coordinator.heartbeat(credentials(body), now(), reported_points(body));
        return nlohmann::json{{"quorum_id", beat.quorum_id}, {"quorum_broken", beat.quorum_broken}};
      });
    });
    http.route("POST", "/v1/quorum", [this](const HttpRequest& req, HttpResponse& res) {
      reply(req, res, true, [this](const nlohmann::json& body, Context& context) {
        const Credentials who = credentials(body);
        const double wait_s = std::clamp(field<double>(body, "wait_s"), 0.0, options.max_wait_s);
        coordinator.request_quorum(who, field<std::int64_t>(body, "step"), now(), field<std::int64_t>(body, "received"));
        const auto deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
        while (true) {
          coordinator.tick(tick_time());
          if (auto formed = coordinator.take_quorum(who)) return to_json(*formed);
          if (stopping || Clock::now() >= deadline) break;
          changed.wait_until(context.lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
        }
        context.status = 202;
        return nlohmann::json{{"waiting_for", coordinator.waiting_for(now())}};
      });
    });
    http.route("POST", "/v1/pipeline", [this](const HttpRequest& req, HttpResponse& res) {
      reply(req, res, true, [this](const nlohmann::json& body, Context& context) {
        const Credentials who = credentials(body);
        const double wait_s = std::clamp(field<double>(body, "wait_s"), 0.0, options.max_wait_s);
        const auto deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
        while (true) {
          if (auto complete = coordinator.take_pipeline(who)) return to_json(*complete);
          if (stopping || Clock::now() >= deadline) break;
          changed.wait_until(context.lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
        }
        context.status = 202;
        return nlohmann::json{{"waiting_for", "a member for each stage of the pipeline replica"}};
      });
    });
    http.route("POST", "/v1/commit", [this](const HttpRequest& req, HttpResponse& res) {
      reply(req, res, true, [this](const nlohmann::json& body, Context& context) {
        const Credentials who = credentials(body);
        const auto quorum_id = field<std::int64_t>(body, "quorum_id");
        const auto step = field<std::int64_t>(body, "step");
        const bool ok = field<bool>(body, "ok");
        coordinator.vote(who, quorum_id, step, ok, ok ? field<std::string>(body, "hash") : "", now(),
                         rejected_members(body));
        const double wait_s = std::clamp(field<double>(body, "wait_s"), 0.0, options.max_wait_s);
        const auto deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
        while (true) {
          coordinator.tick(tick_time());
          if (auto decided = coordinator.take_decision(who, quorum_id, step)) return to_json(*decided);
          if (stopping || Clock::now() >= deadline) break;
          changed.wait_until(context.lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
        }
        context.status = 202;
        return nlohmann::json{{"waiting_for", "the other members' votes"}};
      });
    });
    http.route("POST", "/v1/leave", [this](const HttpRequest& req, HttpResponse& res) {
      reply(req, res, true, [this](const nlohmann::json& body, Context&) {
        const Credentials who = credentials(body);
        const bool finished = body.contains("finished") && field<bool>(body, "finished");  // a bad type: malformed
        coordinator.leave(who, field<std::string>(body, "reason"), now(), finished);
        authenticator.close_session(who.member_id);
        return nlohmann::json::object();
      });
    });
    monitor::add_dashboard_routes(
        http, {[this](const HttpRequest& req) { return visible_status(req); },
               [this](const HttpRequest& req) {
                 std::lock_guard<std::mutex> lock(mutex);
                 return authenticator.status_token_ok(status_token_of(req));
               },
               [this](std::uint64_t after) {
                 std::lock_guard<std::mutex> lock(mutex);
                 return coordinator.history(after);
               },
               public_page});
    http.route("GET", "/metrics", [this](const HttpRequest&, HttpResponse& res) {
      std::lock_guard<std::mutex> lock(mutex);
      res.body = coordinator.metrics_text(now());
      res.content_type = "text/plain; version=0.0.4";
    });
  }

  // Expires silent members and forms quorums between messages, so that waiting requests and heartbeat
  // replies see a lost member within the tick, not at the next message.
  void tick_until_stopped() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      coordinator.tick(tick_time());
      changed.notify_all();
      changed.wait_for(lock, kTickInterval);
    }
  }
};

CoordinatorServer::CoordinatorServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  s.routes();
  if (!s.http.bind(s.options.host, s.options.port)) {
    throw IoError(
        fmt::format("loco coordinator cannot listen on {} (in use, or not an address of this host); "
                    "choose another --port (0 picks a free one) or --host",
                    host_port(s.options.host, s.options.port)));
  }
  s.port = s.http.port();
  s.ticker = std::thread([&s] { s.tick_until_stopped(); });
}

CoordinatorServer::~CoordinatorServer() {
  stop();
  if (impl_->server_thread.joinable()) impl_->server_thread.join();
  if (impl_->ticker.joinable()) impl_->ticker.join();
}

int CoordinatorServer::port() const { return impl_->port; }

void CoordinatorServer::expel(const std::string& member_id, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    try {
      impl_->coordinator.leave({member_id, impl_->options.coordinator.incarnation}, reason, impl_->now());
    } catch (const MembershipError&) {
      return;  // already gone (it left, or its heartbeat expired first)
    }
  }
  impl_->changed.notify_all();
}

void CoordinatorServer::serve() { impl_->http.serve(); }

void CoordinatorServer::start() {
  impl_->server_thread = std::thread([this] { serve(); });
}

void CoordinatorServer::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->changed.notify_all();
  impl_->http.stop();
}

}  // namespace loco::membership
