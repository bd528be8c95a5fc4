#include "loco/elastic/membership_log.h"

#include <chrono>
#include <cmath>
#include <utility>

#include "loco/util/utf8.h"

namespace loco::elastic {

void MembershipLog::set_quorum(std::int64_t quorum_id, std::size_t members, const std::string& member_id) {
  quorum_id_ = quorum_id;
  members_ = members;
  member_id_ = member_id;
}

void MembershipLog::add(const std::string& kind, std::int64_t step, double seconds, const std::string& detail) {
  heals_ += kind == "heal";
  // Milliseconds are plenty, and keep the lines short. `time` (Unix seconds, when it was logged) lets
  // tools line events of several members and outside faults up (bench/chaos.sh).
  const double unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A member that fails attempt after attempt between two lines (churn, a coordinator gone) would pile its
  // events into one line without end: the newest kMaxEventsPerLine are kept, the others counted.
  if (events_.size() == kMaxEventsPerLine) {
    events_.erase(events_.begin());
    ++dropped_;
  }
  events_.push_back({{"kind", kind},
                     {"step", step},
                     {"seconds", std::round(seconds * 1000) / 1000},
                     {"time", std::round(unix_s * 1000) / 1000},
                     {"detail", utf8_prefix(detail, kMaxDetailBytes)}});
}

void MembershipLog::add_fields_to(nlohmann::json& record) {
  record["member"] = member_id_;
  record["quorum_id"] = quorum_id_;
  record["quorum_members"] = members_;
  record["heals"] = heals_;
  if (!events_.empty()) record["membership_events"] = std::exchange(events_, nlohmann::json::array());
  if (dropped_ > 0) record["membership_events_dropped"] = std::exchange(dropped_, 0);
}

}  // namespace loco::elastic
