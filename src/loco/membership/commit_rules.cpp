#include "loco/membership/commit_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace loco::membership {

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::pending: return "pending";
    case Outcome::commit: return "commit";
    case Outcome::abort: return "abort";
  }
  return "unknown";
}

std::string most_common_hash(const std::vector<std::string>& hashes) {
  std::map<std::string, std::size_t> counts;
  for (const auto& hash : hashes) ++counts[hash];
  // The first hash to reach the top count is the lowest-ranked member's among the tied ones.
  std::string canonical;
  std::size_t best = 0;
  for (const auto& hash : hashes) {
    if (counts[hash] > best) {
      best = counts[hash];
      canonical = hash;
    }
  }
  return canonical;
}

CommitDecision decide_commit(const std::vector<std::string>& members, const std::vector<Vote>& votes, bool broken,
                             int min_replicas) {
  CommitDecision decision;
  for (const auto& vote : votes) {
    if (!vote.ok) {
      decision.outcome = Outcome::abort;
      decision.reason = fmt::format("{} could not complete the synchronisation", vote.member);
      return decision;
    }
  }
  if (broken) {
    decision.outcome = Outcome::abort;
    decision.reason = "a member of the quorum left or went silent";
    return decision;
  }
  if (static_cast<int>(members.size()) < min_replicas) {
    decision.outcome = Outcome::abort;
    decision.reason = fmt::format("the quorum has {} members, fewer than min_replicas {}", members.size(), min_replicas);
    return decision;
  }
  if (votes.size() < members.size()) {
    decision.reason = fmt::format("{} of {} votes", votes.size(), members.size());
    return decision;
  }
  std::vector<std::string> hashes;  // in rank order
  for (const auto& member : members) {
    const auto vote = std::find_if(votes.begin(), votes.end(), [&](const Vote& v) { return v.member == member; });
    if (vote != votes.end()) hashes.push_back(vote->hash);
  }
  decision.canonical_hash = most_common_hash(hashes);
  for (const auto& vote : votes) {
    if (vote.hash != decision.canonical_hash) decision.outliers.push_back(vote.member);
  }
  std::sort(decision.outliers.begin(), decision.outliers.end());
  decision.outcome = Outcome::commit;
  return decision;
}

}  // namespace loco::membership
