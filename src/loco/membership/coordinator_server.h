// `loco coordinator`: the run's coordinator on the network (docs/design.md §3 "Membership";
// docs/fault-tolerance.md has the protocol). JSON over HTTP/1.1 (http_server.h, which bounds what anyone may send):
//
//   POST /v1/join       {run_id, name[, pipeline: {replica, stage, stages}]}
//                                                            → {member_id, incarnation, heartbeat_interval_s,
//                                                               heartbeat_timeout_s, store_port}
//   POST /v1/pipeline   {member_id, incarnation, wait_s}     → 200 {members, store_prefix} once a member holds
//                                                               each stage of the member's pipeline replica,
//                                                               202 after wait_s (note "pipeline-units")
//   POST /v1/heartbeat  {member_id, incarnation}             → {quorum_id, quorum_broken}
//   POST /v1/quorum     {member_id, incarnation, step, wait_s} → 200 {quorum_id, incarnation, members, rank,
//                                                               store_prefix, step} once formed, 202 {waiting_for}
//                                                               after wait_s (long poll: ask again)
//   POST /v1/commit     {member_id, incarnation, quorum_id, step, ok, hash, wait_s}
//                                                            → 200 {outcome: commit|abort, canonical_hash, heal,
//                                                               reason} once decided, 202 after wait_s (vote again:
//                                                               a repeated vote only asks for the decision)
//   POST /v1/leave      {member_id, incarnation, reason}     → {}
//   GET  /status (JSON), /metrics (Prometheus text), / (a page for people)
//
// Refused messages (coordinator.h, membership_error.h) get 400/403/409/410 with {"error", "refusal"} and a
// log line; nothing of them is applied. A background ticker expires silent members and wakes waiting
// requests when a quorum forms.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "loco/membership/coordinator.h"

namespace loco::membership {

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 29400;  // 0: any free port (see port())
  CoordinatorOptions coordinator;
  std::string secret;  // the run's (run_secret.h): members prove it to join; required
  double heartbeat_interval_s = 0.1;  // what members are told to use
  double max_wait_s = 10;             // longest a quorum request is held before 202
  int store_port = 0;                 // the run's store on this host (comm/c10d/store_server.h); 0: none
  std::function<void(const std::string&)> log;  // refusals and membership events; default: stderr
};

class CoordinatorServer {
 public:
  // Binds the port; IoError naming it and the fix when it cannot.
  explicit CoordinatorServer(ServerOptions options);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  int port() const;
  // Removes member `member_id` of this incarnation at once, as if it had left: a launcher that saw the
  // member's process die says so instead of waiting for its heartbeat to expire. Unknown ids are ignored.
  void expel(const std::string& member_id, const std::string& reason);
  // Serves until stop(); start() does it on a thread of its own.
  void serve();
  void start();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A fresh incarnation number for a coordinator process (random, never 0).
std::uint64_t new_incarnation();

}  // namespace loco::membership
