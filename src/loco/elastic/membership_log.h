// The membership fields of an elastic member's metrics lines (docs/fault-tolerance.md "Metrics"): every
// line says which quorum the member trains in, with how many members, under which member id; the line
// after a membership event lists it with its step and duration:
//
//   {"step": 48, ..., "member": "c#2", "quorum_id": 3, "quorum_members": 3, "heals": 1,
//    "membership_events": [{"kind": "rejoin", "step": 12, "seconds": 0, "time": 1795000000.123, "detail": "c#1 ->
//    c#2"},
//                          {"kind": "heal", "step": 48, "seconds": 0.05, "time": 1795000000.201,
//                           "detail": "from a#1, 0.9 MB, step 12 -> 48"}]}
//
// Kinds: quorum (a new quorum; seconds: the wait for it), heal (this member adopted a donor's state),
// abort (an outer step that was not committed; seconds: the synchronisation's time so far), rejoin (the
// member joined again under a new id), presumed_commit (the coordinator was replaced before deciding),
// skip (NoLoCo: this member's group exchange failed, so it did not average that round).
// `time`: Unix seconds when the event was logged (its end). `heals`: how many heals this process made so far.
// A line lists at most kMaxEventsPerLine events, the newest, each detail cut to kMaxDetailBytes: the older ones
// are counted in `membership_events_dropped` (so a line stays far below the 1 MiB a reader takes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace loco::elastic {

class MembershipLog {
 public:
  static constexpr std::size_t kMaxEventsPerLine = 100;
  static constexpr std::size_t kMaxDetailBytes = 1024;

  // The member trains in quorum `quorum_id` of `members` members as `member_id` from now on.
  void set_quorum(std::int64_t quorum_id, std::size_t members, const std::string& member_id);
  void add(const std::string& kind, std::int64_t step, double seconds, const std::string& detail);
  // Adds the fields to a metrics line, and the events since the previous line.
  void add_fields_to(nlohmann::json& record);

 private:
  std::int64_t quorum_id_ = 0;
  std::size_t members_ = 0;
  std::string member_id_;
  std::int64_t heals_ = 0;
  nlohmann::json events_ = nlohmann::json::array();
  std::int64_t dropped_ = 0;  // events left out of the next line (kMaxEventsPerLine)
};

}  // namespace loco::elastic
