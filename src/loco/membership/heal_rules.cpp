#include "loco/membership/heal_rules.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "loco/membership/commit_rules.h"

namespace loco::membership {

HealPlan plan_heal(const std::vector<std::int64_t>& steps, const std::vector<std::string>& hashes, ReplicasAlike alike,
                   const std::vector<std::int64_t>& points) {
  if (steps.empty() || steps.size() != hashes.size() || (!points.empty() && points.size() != steps.size())) {
    throw std::invalid_argument("plan_heal needs one step and one hash per member, and one point each or none");
  }
  const auto progress = [&](std::size_t r) {
    return std::make_pair(steps[r], points.empty() ? std::int64_t{0} : points[r]);
  };
  auto furthest = progress(0);
  for (std::size_t r = 1; r < steps.size(); ++r) furthest = std::max(furthest, progress(r));
  std::vector<std::string> up_to_date;
  for (std::size_t r = 0; r < steps.size(); ++r) {
    if (progress(r) == furthest) up_to_date.push_back(hashes[r]);
  }
  HealPlan plan;
  plan.canonical_hash = most_common_hash(up_to_date);
  plan.donor = -1;
  for (std::size_t r = 0; r < steps.size(); ++r) {
    const bool canonical = progress(r) == furthest && hashes[r] == plan.canonical_hash;
    if (canonical && plan.donor < 0) plan.donor = static_cast<int>(r);
    const bool behind = progress(r) != furthest;
    if (behind || (!canonical && alike == ReplicasAlike::yes)) plan.receivers.push_back(static_cast<int>(r));
  }
  return plan;
}

}  // namespace loco::membership
