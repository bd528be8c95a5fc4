// A replica's side of membership (DESIGN.md §3 "Membership"): joins the run at its coordinator,
// heartbeats from a thread of its own (a stopped process stops heartbeating, which is how the
// coordinator tells a hang from a slow link), asks for a quorum at each synchronisation point and leaves.
// The heartbeat thread also learns at once when the member's quorum broke (a member left or expired),
// so training can abandon a collective that would otherwise wait for its timeout.
//
// Where the coordinator is: LOCO_COORDINATOR=host:port and the run's id LOCO_RUN_ID (docs/fault-tolerance.md).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "loco/membership/coordinator.h"
#include "loco/membership/membership_error.h"

namespace loco::membership {

struct CoordinatorAddress {
  std::string host;
  int port = 0;
};

// "host:port" (IPv6 as "[::1]:29400"); ConfigError naming `what` and the expected form.
CoordinatorAddress parse_coordinator_address(const std::string& text, const std::string& what);

struct MemberOptions {
  CoordinatorAddress coordinator;
  std::string run_id;
  std::string name;             // letters, digits, '.', '_', '-' (e.g. host-rank)
  double request_timeout_s = 5;  // one HTTP request, quorum long polls aside
};

class MemberClient {
 public:
  // Joins and starts heartbeating at the interval the coordinator asks for. MembershipError when the
  // coordinator refuses (another run's id, a bad name) or does not answer (Refusal::unavailable).
  explicit MemberClient(MemberOptions options);
  // Stops heartbeating and leaves (best effort: the coordinator expires a silent member anyway).
  ~MemberClient();
  MemberClient(const MemberClient&) = delete;
  MemberClient& operator=(const MemberClient&) = delete;

  const Credentials& credentials() const { return credentials_; }
  const CoordinatorAddress& coordinator() const { return options_.coordinator; }
  // The port of the run's store on the coordinator's host; 0 when the coordinator serves none.
  int store_port() const { return store_port_; }

  // Waits at the synchronisation point after `step` steps until a quorum with this member forms.
  // MembershipError when refused (fenced: rejoin as a new member) or unavailable after `timeout_s`.
  QuorumReply await_quorum(std::int64_t step, double timeout_s);

  // Votes for the outer step after `step` steps in quorum `quorum_id` (ok, and the hash of the global
  // parameters it would commit) and waits for the decision (commit_rules.h). MembershipError when the
  // vote is refused (stale_quorum: ask for a quorum again) or no decision came within `timeout_s`.
  CommitReply vote(std::int64_t quorum_id, std::int64_t step, bool ok, const std::string& hash, double timeout_s);

  // Set by the heartbeat thread: the member's last quorum lost a member or was superseded.
  bool quorum_broken() const { return quorum_broken_; }
  // Set when a heartbeat was refused: this member is no longer in the run and must rejoin.
  std::optional<std::string> fenced() const;

  void leave(const std::string& reason);

 private:
  void heartbeat_until_stopped(double interval_s);
  // Posts `request` to `path` until the coordinator answers 200 (its body) or `timeout_s` passes.
  nlohmann::json long_poll(const std::string& path, nlohmann::json request, double timeout_s, const std::string& what);

  MemberOptions options_;
  Credentials credentials_;
  int store_port_ = 0;
  std::atomic<bool> quorum_broken_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> left_{false};
  struct Fence;
  std::unique_ptr<Fence> fence_;
  std::thread heartbeat_;
};

}  // namespace loco::membership
