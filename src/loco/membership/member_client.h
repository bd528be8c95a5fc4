// A replica's side of membership (docs/design.md §3 "Membership"): joins the run at its coordinator,
// heartbeats from a thread of its own (a stopped process stops heartbeating, which is how the
// coordinator tells a hang from a slow link), asks for a quorum at each synchronisation point and leaves.
// The heartbeat thread also learns at once when the member's quorum broke (a member left or expired),
// so training can abandon a collective that would otherwise wait for its timeout.
//
// A member the coordinator no longer knows rejoins by itself, from the heartbeat thread, as a new member
// (same name, the next number): after it stopped for longer than the heartbeat timeout (it was expired and
// fenced out) or when a replacement coordinator answers (a new incarnation). Quorum requests then go on
// under the new id; a vote of the old membership is refused (the caller decides what its outer step
// became). Only another run's coordinator fences it for good (fenced()), or, for a pipeline stage, this
// run's coordinator no longer knowing it (its replica broke: MemberOptions::place).
//
// Where the coordinator is: LOCO_COORDINATOR=host:port and the run's id LOCO_RUN_ID (docs/fault-tolerance.md);
// the run's secret proves the member belongs to the run (authentication.h, docs/security.md).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loco/membership/coordinator.h"
#include "loco/membership/membership_error.h"
#include "loco/monitor/metric_point.h"

namespace loco::membership {

struct CoordinatorAddress {
  std::string host;
  int port = 0;
};

// "host:port" (IPv6 as "[::1]:29400"); ConfigError naming `what` and the expected form.
CoordinatorAddress parse_coordinator_address(const std::string& text, const std::string& what);

// Metric points a member keeps for its coordinator at most (4 beats' worth).
inline constexpr std::size_t kMaxQueuedReports = 4 * kMaxReportedPoints;

struct MemberOptions {
  CoordinatorAddress coordinator;
  std::string run_id;
  std::string secret;           // the run's (run_secret.h): proves membership, never sent
  std::string name;             // letters, digits, '.', '_', '-' (e.g. host-rank)
  double request_timeout_s = 5;  // one HTTP request, quorum long polls aside
  // How long the first join keeps trying while no coordinator answers (members may start before it, or
  // before its host name resolves). A training member gives it comm.timeout_s, as every other wait.
  double join_timeout_s = 60;
  // Where the client says what happened to its membership (rejoins); stderr when empty.
  std::function<void(const std::string&)> log;
  // The member's stage of a pipeline replica (coordinator.h note "pipeline-units"). A stage the coordinator
  // no longer knows does not rejoin by itself: its replica was broken, and the stage is fenced (fenced())
  // for its process to start again with the replica's other stages. It rejoins a replacement coordinator.
  PipelinePlace place;
  // What every member of the run must share (run_settings.h): the run layer's config keys that must agree.
  // The coordinator refuses a join whose settings differ from its members'. Empty: none compared.
  nlohmann::json settings = nlohmann::json::object();
  // A stop asked of the member (the signal's number; 0: none; note "graceful-stop"), looked at between the
  // polls of the waits that can last until a timeout: for its coordinator to answer a join, for a quorum, for
  // its pipeline's other stages. Such a wait then ends with StopRequested (util/stop_requested.h) within one
  // poll (at most 5 s). A vote's wait is not cut short: it ends with the decision of an exchange under way.
  std::function<int()> stop_requested;
  // A wait that lasts (the first join, a quorum, the pipeline's other stages, a commit decision) is said
  // through `log` every this many seconds, with what the member still waits for: a member that waits for
  // comm.timeout_s (600 s by default) does not look hung.
  double report_wait_every_s = 30;
};

class MemberClient {
 public:
  // Joins and starts heartbeating at the interval the coordinator asks for. MembershipError when the
  // coordinator refuses (another run's id, a bad name) or does not answer within join_timeout_s
  // (Refusal::unavailable).
  explicit MemberClient(MemberOptions options);
  // Stops heartbeating and leaves (best effort: the coordinator expires a silent member anyway).
  ~MemberClient();
  MemberClient(const MemberClient&) = delete;
  MemberClient& operator=(const MemberClient&) = delete;

  // The current membership (it changes when the member rejoins).
  Credentials credentials() const;
  const CoordinatorAddress& coordinator() const { return options_.coordinator; }
  // The port of the run's store on the coordinator's host; 0 when the coordinator serves none.
  int store_port() const;
  // How many times the member rejoined.
  int rejoins() const;

  // Waits at the synchronisation point after `step` steps until a quorum with this member forms (as the
  // member it is by then, should it rejoin meanwhile). MembershipError when fenced for good or unavailable
  // after `timeout_s`.
  QuorumReply await_quorum(std::int64_t step, double timeout_s);

  // A pipeline stage's: waits until a member holds each stage of its replica (its pipeline's members and
  // their group's store prefix). MembershipError when fenced (the replica broke meanwhile), or unavailable
  // after `timeout_s`.
  PipelineReply await_pipeline(double timeout_s);

  // Votes for the outer step after `step` steps in quorum `quorum_id` (ok, and the hash of the global
  // parameters it would commit) and waits for the decision (commit_rules.h). MembershipError when the
  // vote is refused: stale_quorum (ask for a quorum again), unknown_member (this member was expired or
  // expelled meanwhile, so its quorum broke: nothing committed), stale_incarnation (the coordinator was
  // replaced before the decision reached this member), or unavailable when no decision came in `timeout_s`.
  // `rejected`: the members whose pseudo-gradients this member left out (NaN or Inf), reported to the coordinator.
  CommitReply vote(std::int64_t quorum_id, std::int64_t step, bool ok, const std::string& hash, double timeout_s,
                   const std::vector<std::string>& rejected = {});

  // Set by the heartbeat thread: the member's last quorum lost a member or was superseded, or the member
  // rejoined.
  bool quorum_broken() const { return quorum_broken_ || rejoined_since_quorum_; }
  // Set when the run refused this member for good (another run's coordinator answers at the address).
  std::optional<std::string> fenced() const;

  // `finished`: this member trained the run to its end (the coordinator then tells members that are
  // still behind that the run is over).
  void leave(const std::string& reason, bool finished = false);
  // Queues the point of a metrics.jsonl record (monitor::point_from_record) for the coordinator's dashboard:
  // each heartbeat carries at most kMaxReportedPoints of the queue, and past kMaxQueuedReports the oldest are
  // dropped (a member that cannot reach its coordinator does not grow for it). Callable from any thread.
  void report(const nlohmann::json& record);
  // Sends no heartbeat for `seconds`, as a stopped process would not: simulated hangs (dist.churn stalls).
  void pause_heartbeats(double seconds);

 private:
  // A membership and its session key (authentication.h).
  struct Session {
    Credentials credentials;
    std::string key;
  };
  struct Reply {
    int status = 0;  // 200, or 202: not yet (a long poll's answer)
    nlohmann::json body;
  };

  // Joins (again), proving the run's secret: new credentials, session key, store port and heartbeat
  // interval. MembershipError(unauthenticated) when the coordinator refuses the proof, or its answer is
  // not signed with the secret.
  double join();
  Session session() const;
  // Posts `message` to `path` as member `as` (its credentials, the session's next sequence number and MAC)
  // and checks that the answer is signed with the session key.
  Reply post_signed(const std::string& path, nlohmann::json message, const Session& as, double timeout_s);
  void heartbeat_until_stopped();
  // Up to kMaxReportedPoints of the queued metric points, oldest first (under the mutex), and the heartbeat
  // that carries them.
  std::vector<monitor::MetricPoint> take_reports();
  static nlohmann::json heartbeat_message(const std::vector<monitor::MetricPoint>& points);
  // After a heartbeat's refusal of the credentials: joins again; a join the run refuses fences the member
  // for good, one that finds no coordinator is tried again at the next heartbeat.
  void rejoin_after(const MembershipError& refusal);
  // Posts `request` plus the current credentials to `path` until the coordinator answers 200 (its body) or
  // `timeout_s` passes. A refusal of the credentials waits for the heartbeat thread's rejoin: repeated as
  // the new member when `retry_as_new_member`, thrown otherwise. A `stoppable` wait ends with StopRequested
  // once MemberOptions::stop_requested asks for a stop.
  nlohmann::json long_poll(const std::string& path, nlohmann::json request, double timeout_s, const std::string& what,
                           bool retry_as_new_member, bool stoppable);
  // StopRequested (naming `waiting_for`) when MemberOptions::stop_requested asks for a stop.
  void stop_if_requested(const std::string& waiting_for) const;
  void say(const std::string& line) const;

  MemberOptions options_;
  double heartbeat_interval_s_ = 1;
  std::atomic<bool> quorum_broken_{false};
  std::atomic<bool> rejoined_since_quorum_{false};  // the new membership has no quorum yet
  std::atomic<bool> stopping_{false};
  std::atomic<bool> left_{false};
  struct Shared;  // credentials, store port, rejoins and the fence, guarded by one mutex
  std::unique_ptr<Shared> shared_;
  std::thread heartbeat_;
};

}  // namespace loco::membership
