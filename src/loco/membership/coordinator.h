// The coordinator's state (DESIGN.md §3 "Membership"): who is a member of the run, their heartbeats,
// who waits at a synchronisation point, the quorums formed so far and recent events. Times are the
// coordinator's clock in seconds, passed in, so that the logic is tested without waiting; the server
// (coordinator_server.h) adds the network, the clock and the locking.
//
// A member joins with a name and gets a unique id (a restarted process is a new member) and the
// coordinator's incarnation; every later message carries both, so messages of members that expired or
// joined an earlier incarnation are refused (MembershipError), never applied. A member that asks for a
// quorum is served once, by the first quorum the rules (quorum_rules.h) form with it. When a member of the
// current quorum expires or leaves, the quorum is broken: every heartbeat reply says so at once, so the
// others abandon their collective instead of waiting for its timeout.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loco/membership/quorum_rules.h"

namespace loco::membership {

struct Credentials {
  std::string member_id;
  std::uint64_t incarnation = 0;
};

struct JoinReply {
  std::string member_id;
  std::uint64_t incarnation = 0;
};

struct HeartbeatReply {
  std::int64_t quorum_id = 0;  // the run's latest quorum
  bool quorum_broken = false;  // the member's quorum lost a member or was superseded: abandon its collectives
};

struct QuorumReply {
  std::int64_t quorum_id = 0;
  std::uint64_t incarnation = 0;
  std::vector<std::string> members;  // sorted
  int rank = 0;                      // this member's index in `members`
  std::string store_prefix;          // "loco/{incarnation}/q{quorum_id}/": the process group's keys
  std::int64_t step = 0;             // the furthest step of its members: a member behind it catches up
};

struct CoordinatorOptions {
  QuorumRules rules;
  std::string run_id;
  std::uint64_t incarnation = 0;
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options);

  // MembershipError(wrong_run) for another run's id.
  JoinReply join(const std::string& run_id, const std::string& name, double now);
  // The others throw MembershipError(stale_incarnation / unknown_member) for refused credentials.
  HeartbeatReply heartbeat(const Credentials& who, double now);
  // Marks the member waiting at its synchronisation point after `step` steps (repeats keep the first time).
  void request_quorum(const Credentials& who, std::int64_t step, double now);
  // The quorum formed for the member's request, once; nullopt while it waits.
  std::optional<QuorumReply> take_quorum(const Credentials& who);
  void leave(const Credentials& who, const std::string& reason, double now);

  // Expires silent members and forms a quorum when the rules allow. Returns the time the state changes
  // next without a message (a join window's end, a heartbeat's expiry), so a server knows when to wake.
  double tick(double now);
  // Why the member still waits, in words ("a majority: 1 of 3 healthy members wait").
  std::string waiting_for(double now) const;

  // GET /status: run, incarnation, rules, the current quorum, every member and the recent events.
  nlohmann::json status(double now) const;
  // GET /metrics: Prometheus text exposition.
  std::string metrics_text(double now) const;

 private:
  struct Member {
    std::string name;
    double joined_at = 0;
    double last_heartbeat = 0;
    std::optional<double> waiting_since;
    std::int64_t step = 0;
    std::optional<QuorumReply> served;  // formed for the request, not yet taken
    std::int64_t quorum_id = 0;         // the last quorum it was given
  };
  struct Event {
    double time;
    std::string kind;  // join | leave | expire | quorum
    std::string detail;
  };

  Member& member(const Credentials& who);
  void remove(const std::string& id, const std::string& kind, const std::string& detail, double now);
  void record(double now, std::string kind, std::string detail);
  std::vector<MemberState> states() const;

  CoordinatorOptions options_;
  std::map<std::string, Member> members_;  // by id
  std::map<std::string, std::int64_t> joins_by_name_;
  Quorum quorum_;
  bool quorum_broken_ = false;
  std::deque<Event> events_;
  std::map<std::string, std::int64_t> event_counts_;
};

}  // namespace loco::membership
