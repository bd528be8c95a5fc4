// When a run's replicas may synchronise together (docs/design.md §3 "Membership"; docs/fault-tolerance.md):
// the quorum rules as pure functions of what the coordinator knows (members, heartbeats, who waits at a
// synchronisation point) and its clock, tested without a network or torch.
//
//   healthy     a member whose last heartbeat is within heartbeat_timeout_s
//   waiting     a healthy member that asked for a quorum and has not been given one
//   a quorum forms from the waiting members when
//     (1) there are at least min_replicas of them (start_replicas for the run's first quorum, so that the
//         replicas of a run start together rather than the first two racing ahead), and
//     (2) they are a strict majority of the healthy members (two halves of a partitioned run can never
//         both form one), and
//     (3) every member of the previous quorum is among them (the common case: nobody left), or every
//         healthy member is waiting (nobody else to wait for), or join_window_s has passed since the first
//         member of the previous quorum asked (since the first request when none of them waits): the
//         missing members had their chance. A newcomer's long wait does not shorten the wait for a member
//         of the previous quorum that is only a little late.
//   The quorum keeps its id when its members are the previous quorum's; any change takes the next id, and
//   so does the quorum after an aborted synchronisation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loco::membership {

struct QuorumRules {
  int min_replicas = 1;
  int start_replicas = 0;  // the first quorum needs max(min_replicas, start_replicas)
  double heartbeat_timeout_s = 3;
  double join_window_s = 5;
};

// What the coordinator knows of one member. Times are the coordinator's clock, in seconds.
struct MemberState {
  std::string id;
  double last_heartbeat = 0;
  std::optional<double> waiting_since;  // asked for a quorum then, not yet given one
  std::int64_t step = 0;                // the step it reported when it last asked for a quorum
};

struct Quorum {
  std::int64_t id = 0;               // 0: none formed yet
  std::vector<std::string> members;  // sorted; a member's rank is its index
};

struct QuorumDecision {
  bool form = false;
  std::vector<std::string> members;  // sorted, when `form`
  std::string waiting_for;           // why not, in words, when not `form`
  std::optional<double> decide_again_at;  // the time the answer changes without any new message (join window)
};

bool is_healthy(const MemberState& member, double now, const QuorumRules& rules);

QuorumDecision decide_quorum(const std::vector<MemberState>& members, const Quorum& previous, double now,
                             const QuorumRules& rules);

// A member that is one stage of a pipeline replica (docs/pipeline.md "Churn"): `unit` names the replica.
struct StageMember {
  std::string unit;
  int stage = 0;
  MemberState state;  // its id is the member's
};

// The pipeline replicas among `members` as members of the rules above (their ids: the units' names, sorted):
// a replica is healthy when every stage is, waits once every stage waits (since the last one asked), and
// stands at the furthest of its stages' steps. Only replicas with exactly one member for each of `stages`
// stages count: one whose stage is missing cannot train, so it neither joins a quorum nor counts as healthy.
std::vector<MemberState> pipeline_replicas(const std::vector<StageMember>& members, int stages);

// The quorum after `previous` with `members` (sorted): the same id when nothing changed, the next one
// otherwise, or always with `renew` (after an aborted synchronisation: its group may be out of step, and a
// new id gives the next group fresh store keys).
Quorum next_quorum(const Quorum& previous, const std::vector<std::string>& members, bool renew = false);

}  // namespace loco::membership
