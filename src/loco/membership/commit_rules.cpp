#include "loco/membership/commit_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace loco::membership {

std::string impossible_outliers(const std::vector<std::string>& outliers, const std::vector<std::string>& members) {
  if (!std::is_sorted(outliers.begin(), outliers.end()) ||
      std::adjacent_find(outliers.begin(), outliers.end()) != outliers.end()) {
    return "its outliers are not a sorted list of distinct members";
  }
  for (const std::string& outlier : outliers) {
    if (!std::binary_search(members.begin(), members.end(), outlier)) {
      return fmt::format("it names {} an outlier, who is no member of the quorum", outlier);
    }
  }
  if (!outliers.empty() && outliers.size() >= members.size()) return "it names every member an outlier";
  return "";
}

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

std::vector<CommitDecision> decide_commit_by_stage(const std::vector<std::vector<std::string>>& stages,
                                                   const std::vector<Vote>& votes, bool broken, int min_replicas) {
  std::vector<CommitDecision> decisions;
  for (const std::vector<std::string>& members : stages) {
    std::vector<Vote> theirs;
    for (const Vote& vote : votes) {
      if (std::find(members.begin(), members.end(), vote.member) != members.end()) theirs.push_back(vote);
    }
    decisions.push_back(decide_commit(members, theirs, broken, min_replicas));
  }
  // One stage's abort (or a vote still missing) holds for every stage: a replica's stages apply an outer
  // step together or not at all.
  for (const Outcome outcome : {Outcome::abort, Outcome::pending}) {
    const auto first = std::find_if(decisions.begin(), decisions.end(),
                                    [&](const CommitDecision& d) { return d.outcome == outcome; });
    if (first == decisions.end()) continue;
    const std::string reason =
        stages.size() > 1 ? fmt::format("stage {}: {}", first - decisions.begin(), first->reason) : first->reason;
    for (CommitDecision& d : decisions) d = CommitDecision{outcome, "", {}, reason};
    return decisions;
  }
  return decisions;
}

}  // namespace loco::membership
