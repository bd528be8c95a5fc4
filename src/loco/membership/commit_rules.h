// Two-phase synchronisation (docs/design.md §3 "Membership"; docs/fault-tolerance.md "Commits"): after an
// outer step computed on copies, every member of the quorum votes (ok, and a hash of the global
// parameters it would commit); the coordinator commits only when every member voted ok and the quorum is
// whole and has min_replicas, and aborts otherwise; nothing is applied on abort. The votes also check
// consistency: the most common hash is canonical (ties: the lowest-ranked member's), and a member whose
// hash differs must fetch the canonical state before it goes on. Pure logic, tested without a network.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace loco::membership {

struct Vote {
  std::string member;
  bool ok = false;
  std::string hash;  // of what the member would commit (hex); empty when !ok
};

enum class Outcome { pending, commit, abort };

struct CommitDecision {
  Outcome outcome = Outcome::pending;
  std::string canonical_hash;         // commit: the most common hash
  std::vector<std::string> outliers;  // commit: members whose hash differs (they must heal)
  std::string reason;                 // abort and pending: why, in words
};

// `members`: the quorum, sorted (rank order). `broken`: a member of the quorum left or went silent.
CommitDecision decide_commit(const std::vector<std::string>& members, const std::vector<Vote>& votes, bool broken,
                             int min_replicas);

// The same for a quorum of pipeline replicas (docs/pipeline.md "Churn"): `stages[s]` lists the members that
// hold stage s of the quorum's replicas, in rank order. Each stage's hashes are compared among that stage's
// members alone (the stages hold different tensors); the synchronisation commits only when every stage
// would, and aborts for all when one stage aborts. One decision per stage, with that stage's outliers (a
// stage whose members agree shares no state).
std::vector<CommitDecision> decide_commit_by_stage(const std::vector<std::vector<std::string>>& stages,
                                                   const std::vector<Vote>& votes, bool broken, int min_replicas);

const char* outcome_name(Outcome outcome);

// What makes a commit decision's `outliers` impossible for a quorum of `members` (sorted), or "": not a sorted
// list of distinct members of the quorum, or all of them (no one holds the common state to heal from). A member
// checks the decision it is sent, which only a coordinator that lies gets wrong (audit round 11: "every member an
// outlier" read past the quorum's members, SIGSEGV; an unsorted list was searched as sorted).
std::string impossible_outliers(const std::vector<std::string>& outliers, const std::vector<std::string>& members);

// The canonical one of `hashes` (in rank order): the most common; ties go to the lowest-ranked member's.
// Empty for no hashes.
std::string most_common_hash(const std::vector<std::string>& hashes);

}  // namespace loco::membership
