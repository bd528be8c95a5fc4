// The coordinator's state (docs/design.md §3 "Membership"): who is a member of the run, their heartbeats,
// who waits at a synchronisation point, the quorums formed so far and recent events. Times are the
// coordinator's clock in seconds, passed in, so that the logic is tested without waiting; the server
// (coordinator_server.h) adds the network, the clock and the locking.
//
// A member joins with a name and gets a unique id (a restarted process is a new member) and the
// coordinator's incarnation; every later message carries both, so messages of members that expired or
// joined an earlier incarnation are refused (MembershipError), never applied. A member that asks for a
// quorum is served once, by the first quorum the rules (quorum_rules.h) form with it (again if the answer was
// lost: it says which reply it received last, QuorumReply::serial). When a member of the
// current quorum expires or leaves, the quorum is broken: every heartbeat reply says so at once, so the
// others abandon their collective instead of waiting for its timeout. Outer steps commit in two phases
// (vote, take_decision; commit_rules.h).
//
// Note "pipeline-units" (docs/pipeline.md "Churn"): with dist.stages = S > 1 a replica is S processes, each
// a member that joins with its place (the replica's name, its stage, S). The rules then count replicas,
// not members: a replica takes part when one member holds each of its stages (quorum_rules.h
// pipeline_replicas), a quorum's replicas are ranked alike in every stage's reply (so each stage lays out
// the same data), each stage meets in its own group ("…/q{id}/s{stage}/"), votes are compared within a
// stage and an outer step commits for every stage or none (decide_commit_by_stage). A replica whose stage
// leaves (or expires, or is expelled) is broken: its other members are removed with it (they cannot train
// without the stage, and must not rejoin its successor's pipeline), and its next members form a new
// pipeline (take_pipeline) under a new generation's store keys.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loco/membership/commit_rules.h"
#include "loco/membership/quorum_rules.h"
#include "loco/monitor/metrics_history.h"

namespace loco::membership {

// The most metric points one heartbeat may carry (a member logs far less often than it heartbeats; one that
// fell behind sends the rest with the next beats).
inline constexpr std::size_t kMaxReportedPoints = 64;

// The furthest step a member may claim: 2^40 optimizer steps, 35 years at one a millisecond.
inline constexpr std::int64_t kMaxStep = std::int64_t{1} << 40;

struct Credentials {
  std::string member_id;
  std::uint64_t incarnation = 0;
};

// Where a member sits in a pipeline replica (note "pipeline-units"). stages = 1: the member is a whole replica.
struct PipelinePlace {
  std::string unit;  // the replica's name (stages > 1)
  int stage = 0;
  int stages = 1;
};

// The most member names a run's coordinator remembers (each name numbers its members' ids: name#n).
inline constexpr std::size_t kMaxMemberNames = 100000;

// The most stages a run may have (a bound on what a join may claim).
inline constexpr int kMaxStages = 1024;

// A complete pipeline replica: its members in stage order, and the store prefix of their pipeline group
// ("loco/{incarnation}/pipeline/{unit}/g{generation}/": a new one whenever the replica's members change).
struct PipelineReply {
  std::vector<std::string> members;
  std::string store_prefix;
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
  std::vector<std::int64_t> steps;   // each member's step when it asked, in rank order
  // Numbers the replies the coordinator serves (1, 2, … across its members): a member asking again sends
  // the serial it last received, so that an answer lost on the way is served again (request_quorum).
  std::int64_t serial = 0;
  // The run is over: a member finished it at `step` while this one was behind. This reply has only the
  // asking member and no group; the member stops (its state is behind the finished members').
  bool run_finished = false;
};

struct CommitReply {
  Outcome outcome = Outcome::pending;  // commit or abort
  std::string canonical_hash;          // commit: what every member must hold afterwards
  bool heal = false;                   // commit: this member's hash differs; fetch the canonical state
  std::vector<std::string> outliers;   // commit: every member whose hash differs (they all take part in it)
  std::string reason;                  // abort: why
};

struct CoordinatorOptions {
  QuorumRules rules;
  std::string run_id;
  std::uint64_t incarnation = 0;
  // A member whose pseudo-gradient a majority of a synchronisation's members rejected (NaN or Inf) in this
  // many synchronisations is removed from the run and its name barred (0: never).
  int max_rejections = 3;
  // Told of every event as it is recorded (join, leave, expire, quorum, commit, abort, expel, stall), for the log.
  std::function<void(const std::string& kind, const std::string& detail)> on_event;
  // The run's train.steps, where whoever starts the coordinator knows them (`loco coordinator --steps`, the
  // replicas of an elastic run as threads): a member claiming a later step is refused. 0: unknown, and
  // only kMaxStep bounds the steps.
  std::int64_t run_steps = 0;
  // The member processes that must wait before the run's first quorum forms (`loco launch --elastic
  // --nproc N` sets N, which counts processes whatever the stages): 0, none beyond the rules.
  int start_members = 0;
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options);

  // MembershipError(wrong_run) for another run's id.
  void require_run(const std::string& run_id) const;
  // MembershipError(wrong_run) for another run's id. The server admits only members that proved the run's
  // secret (authentication.h).
  // `place`: the member's stage of a pipeline replica (note "pipeline-units"); every member of a run must
  // claim the same number of stages (MembershipError(malformed) otherwise). A member that claims a stage
  // another member holds replaces it (the stage's process was started again): the replica is broken.
  // `settings`: what every member of the run must share (run_settings.h); a member whose settings differ
  // from the run's members' is refused (MembershipError(malformed), naming the first key that differs). A run
  // without members takes the joiner's: a mistaken first member does not stay the run's reference.
  JoinReply join(const std::string& run_id, const std::string& name, double now, const PipelinePlace& place = {},
                 const nlohmann::json& settings = nlohmann::json::object());
  // The member's pipeline replica once one member holds each stage; nullopt while a stage is missing.
  std::optional<PipelineReply> take_pipeline(const Credentials& who) const;
  // MembershipError(stale_incarnation) unless `who` joined this incarnation (which anyone may read on the
  // status page: refusing it tells nobody which members exist).
  void require_incarnation(const Credentials& who) const;
  // MembershipError(stale_incarnation / unknown_member) unless `who` is a current member.
  void require_member(const Credentials& who) const;
  // Those of `ids` that are no longer members (they left or expired).
  std::vector<std::string> former_members(const std::vector<std::string>& ids) const;
  // The others throw MembershipError(stale_incarnation / unknown_member) for refused credentials.
  // `points`: the member's metrics since its last heartbeat, kept in its name's history (received `now`).
  HeartbeatReply heartbeat(const Credentials& who, double now, std::vector<monitor::MetricPoint> points = {});
  // Marks the member waiting at its synchronisation point after `step` steps (repeats keep the first time).
  // `received`: the serial of the last quorum reply the member received (0: none). A member that asks at
  // the step of the reply it was last given, but did not receive it (the answer was lost on the way), is
  // given it again while that quorum stands: its other members are meeting in the quorum's group.
  void request_quorum(const Credentials& who, std::int64_t step, double now, std::int64_t received = 0);
  // The quorum formed for the member's request, once (again after a lost answer); nullopt while it waits.
  std::optional<QuorumReply> take_quorum(const Credentials& who);
  // `finished`: the member trained the run to its end; members still behind are told so from then on.
  void leave(const Credentials& who, const std::string& reason, double now, bool finished = false);

  // Phase one of a synchronisation (commit_rules.h): the member's vote for the outer step after `step`
  // steps in quorum `quorum_id`. MembershipError(stale_quorum) when that is not the member's current
  // quorum; a second vote for the same synchronisation is ignored.
  // `rejected`: the members whose pseudo-gradients the voter left out (NaN or Inf); a member reported by a
  // majority of the synchronisation's members counts one rejection (CoordinatorOptions::max_rejections).
  void vote(const Credentials& who, std::int64_t quorum_id, std::int64_t step, bool ok, const std::string& hash,
            double now, const std::vector<std::string>& rejected = {});
  // Phase two: the decision, once every member voted (or the quorum broke); nullopt while pending.
  std::optional<CommitReply> take_decision(const Credentials& who, std::int64_t quorum_id, std::int64_t step);

  // Expires silent members and forms a quorum when the rules allow. Returns the time the state changes
  // next without a message (a join window's end, a heartbeat's expiry), so a server knows when to wake.
  double tick(double now);

  // The coordinator itself did not run for `stalled_s` seconds until `now` (its process was stopped, its
  // machine paused): the members' heartbeats of that time wait unread in its sockets, so each member's last
  // heartbeat moves on by the stall, and none expires for the coordinator's own silence. Said as an event.
  void excuse_stall(double now, double stalled_s);
  // Why the member still waits, in words ("a majority: 1 of 3 healthy members wait").
  std::string waiting_for(double now) const;

  // GET /status: run, incarnation, rules, the current quorum, every member (with its name's latest metrics),
  // the names that reported metrics but are no member now (former_members) and the recent events.
  nlohmann::json status(double now) const;
  // GET /history: the metric points after sequence number `after`, by member name (monitor/metrics_history.h).
  nlohmann::json history(std::uint64_t after) const { return history_.since(after); }
  // GET /metrics: Prometheus text exposition.
  std::string metrics_text(double now) const;

 private:
  struct Member {
    std::string name;
    PipelinePlace place;
    double joined_at = 0;
    double last_heartbeat = 0;
    std::optional<double> waiting_since;
    std::int64_t step = 0;
    std::optional<QuorumReply> served;  // formed for the request, not yet taken
    std::optional<QuorumReply> taken;   // the last one taken: served again if its answer was lost
    std::int64_t quorum_id = 0;         // the last quorum it was given
  };
  struct Event {
    double time;
    std::string kind;  // join | leave | expire | quorum | commit | abort | expel | stall
    std::string detail;
  };

  struct Synchronisation {
    std::vector<std::vector<std::string>> stages;  // the quorum's members by stage, when the first vote came
    std::vector<Vote> votes;
    std::optional<std::vector<CommitDecision>> decision;  // one per stage
    std::map<std::string, std::set<std::string>> rejections;  // rejected member → the voters that said so
  };
  using SyncKey = std::pair<std::int64_t, std::int64_t>;  // (quorum id, step)

  Member& member(const Credentials& who);
  void decide_synchronisations(double now);
  // Removes the member; unless it `finished` the run, the other members of its pipeline replica go too.
  void remove(const std::string& id, const std::string& kind, const std::string& detail, double now,
              bool finished = false);
  // Erases one member, marking the quorum broken when it belonged to it.
  void erase(const std::string& id);
  // What the quorum rules count: the members, or with stages the complete pipeline replicas.
  QuorumDecision decide(double now) const;
  // The members of `units` (the rules' ids) by stage, in the units' order.
  std::vector<std::vector<std::string>> members_by_stage(const std::vector<std::string>& units) const;
  void record(double now, std::string kind, std::string detail);
  std::vector<MemberState> states() const;

  CoordinatorOptions options_;
  std::map<std::string, Member> members_;  // by id
  std::map<std::string, std::int64_t> joins_by_name_;
  std::map<std::string, int> rejections_;  // by member id: synchronisations that rejected its contribution
  std::set<std::string> barred_names_;     // removed for their rejected contributions
  std::set<std::string> barred_units_;     // pipeline replicas removed so (every stage's name is barred with it)
  Quorum quorum_;                                     // with stages: of pipeline replicas' names
  std::vector<std::vector<std::string>> quorum_stages_;  // its members by stage (one list without stages)
  int stages_ = 0;                                    // claimed by the first join (0: none yet)
  nlohmann::json settings_ = nlohmann::json::object();    // the run's members' (run_settings.h)
  std::map<std::string, std::int64_t> unit_generations_;  // a pipeline replica's: its members changed
  bool quorum_broken_ = false;
  bool renew_quorum_ = false;  // a synchronisation aborted: the next quorum takes a new id
  std::int64_t finished_step_ = 0;  // > 0: a member finished the run at this step
  // The step of the furthest quorum formed (note "no-fresh-restart" in coordinator.cpp).
  std::int64_t reached_step_ = 0;
  std::int64_t replies_formed_ = 0;  // the last QuorumReply::serial
  std::map<SyncKey, Synchronisation> synchronisations_;
  std::deque<Event> events_;
  std::map<std::string, std::int64_t> event_counts_;
  // By member name, so that a restarted member's curve goes on; bounded (64 members: at most 15 MB).
  monitor::MetricsHistory history_;
};

}  // namespace loco::membership
