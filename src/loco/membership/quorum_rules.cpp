#include "loco/membership/quorum_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace loco::membership {

bool is_healthy(const MemberState& member, double now, const QuorumRules& rules) {
  return now - member.last_heartbeat <= rules.heartbeat_timeout_s;
}

QuorumDecision decide_quorum(const std::vector<MemberState>& members, const Quorum& previous, double now,
                             const QuorumRules& rules) {
  std::vector<std::string> waiting;
  std::size_t healthy = 0;
  std::int64_t furthest = 0, furthest_waiting = 0;
  double first_request = now, first_previous_request = std::numeric_limits<double>::infinity();
  for (const auto& member : members) {
    if (!is_healthy(member, now, rules)) continue;
    ++healthy;
    furthest = std::max(furthest, member.step);
    if (!member.waiting_since) continue;
    waiting.push_back(member.id);
    furthest_waiting = std::max(furthest_waiting, member.step);
    first_request = std::min(first_request, *member.waiting_since);
    if (std::find(previous.members.begin(), previous.members.end(), member.id) != previous.members.end()) {
      first_previous_request = std::min(first_previous_request, *member.waiting_since);
    }
  }
  std::sort(waiting.begin(), waiting.end());
  QuorumDecision decision;
  const bool first = previous.id == 0;
  const int needed = first ? std::max(rules.min_replicas, rules.start_replicas) : rules.min_replicas;
  if (static_cast<int>(waiting.size()) < needed) {
    decision.waiting_for = fmt::format("{} of the {} replicas {} asks for", waiting.size(), needed,
                                       first && needed > rules.min_replicas ? "start_replicas" : "min_replicas");
    return decision;
  }
  if (2 * waiting.size() <= healthy) {
    decision.waiting_for = fmt::format("a majority: {} of {} healthy members wait", waiting.size(), healthy);
    return decision;
  }
  if (furthest_waiting < furthest) {
    decision.waiting_for = fmt::format("a member at step {} (the waiting members are at step {} at most: they wait "
                                       "for the members ahead of them to synchronise)",
                                       furthest, furthest_waiting);
    return decision;
  }
  const bool previous_all_back =
      !previous.members.empty() && std::all_of(previous.members.begin(), previous.members.end(), [&](const auto& id) {
        return std::binary_search(waiting.begin(), waiting.end(), id);
      });
  const double window_ends =
      (std::isfinite(first_previous_request) ? first_previous_request : first_request) + rules.join_window_s;
  if (previous_all_back || waiting.size() == healthy || now >= window_ends) {
    decision.form = true;
    decision.members = std::move(waiting);
    return decision;
  }
  decision.waiting_for = fmt::format("the join window ({:.1f} s left; {} of {} healthy members wait)",
                                     window_ends - now, waiting.size(), healthy);
  decision.decide_again_at = window_ends;
  return decision;
}

std::vector<MemberState> pipeline_replicas(const std::vector<StageMember>& members, int stages) {
  std::map<std::string, std::vector<const StageMember*>> by_unit;
  for (const StageMember& member : members) by_unit[member.unit].push_back(&member);
  std::vector<MemberState> replicas;
  for (const auto& [unit, parts] : by_unit) {
    std::set<int> held;
    for (const StageMember* part : parts) held.insert(part->stage);
    if (static_cast<int>(parts.size()) != stages || static_cast<int>(held.size()) != stages) continue;
    MemberState replica{unit, std::numeric_limits<double>::infinity(), std::nullopt, 0};
    bool all_waiting = true;
    double last_asked = -std::numeric_limits<double>::infinity();
    for (const StageMember* part : parts) {
      replica.last_heartbeat = std::min(replica.last_heartbeat, part->state.last_heartbeat);
      replica.step = std::max(replica.step, part->state.step);
      all_waiting = all_waiting && part->state.waiting_since.has_value();
      if (part->state.waiting_since) last_asked = std::max(last_asked, *part->state.waiting_since);
    }
    if (all_waiting) replica.waiting_since = last_asked;
    replicas.push_back(replica);
  }
  return replicas;
}

Quorum next_quorum(const Quorum& previous, const std::vector<std::string>& members, bool renew) {
  if (!renew && previous.id > 0 && members == previous.members) return previous;
  return Quorum{previous.id + 1, members};
}

}  // namespace loco::membership
