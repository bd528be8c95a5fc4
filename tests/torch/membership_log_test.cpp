// An elastic member's membership events in its metrics lines (elastic/membership_log.h): a line lists the
// events since the previous one, at most MembershipLog::kMaxEventsPerLine of them, the newest, with the others
// counted, and each detail cut to kMaxDetailBytes (audit round 13: a member failing attempt after attempt between
// two lines piled its events into one line past the 1 MiB the dashboard reads, which then lost the line whole).
#include "loco/elastic/membership_log.h"

#include <gtest/gtest.h>

#include <string>

namespace loco::elastic {
namespace {

TEST(MembershipLog, ALineListsTheEventsSinceThePreviousOne) {
  MembershipLog log;
  log.set_quorum(3, 2, "a#1");
  log.add("quorum", 50, 0.4124, "q3: 2 members (a#1, b#1)");
  nlohmann::json first;
  log.add_fields_to(first);
  EXPECT_EQ(first.at("member"), "a#1");
  EXPECT_EQ(first.at("quorum_id"), 3);
  EXPECT_EQ(first.at("quorum_members"), 2);
  ASSERT_EQ(first.at("membership_events").size(), 1u);
  EXPECT_EQ(first.at("membership_events")[0].at("seconds"), 0.412);
  EXPECT_FALSE(first.contains("membership_events_dropped"));
  nlohmann::json second;
  log.add_fields_to(second);
  EXPECT_FALSE(second.contains("membership_events"));
}

TEST(MembershipLog, ALineKeepsTheNewestEventsAndCountsTheOthers) {
  MembershipLog log;
  const std::size_t added = MembershipLog::kMaxEventsPerLine + 37;
  for (std::size_t i = 0; i < added; ++i) log.add("abort", static_cast<std::int64_t>(i), 0, std::string(5000, 'x'));
  nlohmann::json line;
  log.add_fields_to(line);
  const nlohmann::json& events = line.at("membership_events");
  ASSERT_EQ(events.size(), MembershipLog::kMaxEventsPerLine);
  EXPECT_EQ(events.front().at("step"), 37);
  EXPECT_EQ(events.back().at("step"), static_cast<std::int64_t>(added - 1));
  EXPECT_EQ(line.at("membership_events_dropped"), 37);
  EXPECT_EQ(events.front().at("detail").get<std::string>().size(), MembershipLog::kMaxDetailBytes);
  EXPECT_LT(line.dump().size(), std::size_t{1} << 20);
  log.add("quorum", 999, 0, "q9");
  nlohmann::json next;
  log.add_fields_to(next);
  EXPECT_EQ(next.at("membership_events").size(), 1u);
  EXPECT_FALSE(next.contains("membership_events_dropped"));
}

}  // namespace
}  // namespace loco::elastic
