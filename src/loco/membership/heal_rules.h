// Who sends a state and who adopts it when a quorum's members are not alike (docs/fault-tolerance.md
// "Healing"). The members at the quorum's furthest step are up to date; among them the most common state
// hash is canonical (ties: the lowest-ranked member's, as for commits, commit_rules.h), and the
// lowest-ranked member holding it donates. Members behind, and up-to-date members whose hash differs,
// adopt the donor's state and check it against the canonical hash (for NoLoCo, whose replicas differ, only
// the members behind). Pure logic, tested without a network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loco::membership {

struct HealPlan {
  int donor = 0;               // rank of the member that sends its state
  std::string canonical_hash;  // what the received state's hash must be
  std::vector<int> receivers;  // ranks that adopt it, ascending; empty: nobody needs a state
};

// Whether up-to-date members should hold the same state: they do after a DiLoCo commit or a data parallel
// step; NoLoCo's replicas differ by design, so there only members behind adopt a state.
enum class ReplicasAlike { yes, no };

// `steps` and `hashes`: each member's step and state hash, in rank order (the same length, not empty).
// `points` (empty, or one per member): each member's last synchronisation point. Note "sync-progress": at one
// step a member whose synchronisation there is done is ahead of one whose synchronisation is still to do (it
// stopped while waiting for a quorum, and another committed that synchronisation without it), so members
// are ordered by (step, point). Ordered by step alone, both counted as up to date, and each took its own
// branch at the synchronisation: one waited in the exchange until comm.timeout_s, the other trained on.
HealPlan plan_heal(const std::vector<std::int64_t>& steps, const std::vector<std::string>& hashes,
                   ReplicasAlike alike = ReplicasAlike::yes, const std::vector<std::int64_t>& points = {});

}  // namespace loco::membership
