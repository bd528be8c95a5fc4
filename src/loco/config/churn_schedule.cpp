#include "loco/config/churn_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>

#include "loco/util/error.h"

namespace loco {
namespace {

constexpr const char* kForms = "R@S:leave, R@T:return or R@S:stall=K (replica R from 0, step S >= 1, K seconds)";

std::vector<std::string> split_events(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  for (const char c : text + ",") {
    if (c == ',') {
      const auto first = current.find_first_not_of(" \t");
      if (first != std::string::npos) out.push_back(current.substr(first, current.find_last_not_of(" \t") - first + 1));
      current.clear();
    } else {
      current += c;
    }
  }
  return out;
}

}  // namespace

std::vector<ChurnEvent> parse_churn_schedule(const std::string& text, std::int64_t replicas) {
  static const std::regex form(R"(([0-9]{1,6})@([0-9]{1,12}):(leave|return|stall=([0-9]+(\.[0-9]*)?)))");
  std::vector<ChurnEvent> events;
  for (const std::string& item : split_events(text)) {
    std::smatch m;
    if (!std::regex_match(item, m, form)) {
      throw ConfigError(fmt::format("dist.churn: '{}' is not an event; write {}", item, kForms));
    }
    ChurnEvent e;
    e.replica = std::stoi(m[1]);
    e.step = std::stoll(m[2]);
    const std::string kind = m[3];
    e.kind = kind == "leave" ? ChurnEvent::Kind::leave : kind == "return" ? ChurnEvent::Kind::rejoin
                                                                           : ChurnEvent::Kind::stall;
    if (e.kind == ChurnEvent::Kind::stall) e.seconds = std::stod(m[4]);
    if (e.replica >= replicas) {
      throw ConfigError(fmt::format(
          "dist.churn: '{}' names replica {}, but dist.replicas is {} (replicas count from 0)", item, e.replica,
          replicas));
    }
    if (e.step < 1) throw ConfigError(fmt::format("dist.churn: '{}': steps count from 1", item));
    if (e.kind == ChurnEvent::Kind::stall && !(e.seconds > 0)) {
      throw ConfigError(fmt::format("dist.churn: '{}': a stall lasts a positive number of seconds", item));
    }
    events.push_back(e);
  }
  // Each replica's story must make sense in step order: present → leave → return → present ...
  for (std::int64_t r = 0; r < replicas; ++r) {
    bool gone = false;
    for (const ChurnEvent& e : churn_events_of(events, static_cast<int>(r))) {
      const std::string what = fmt::format("replica {} at step {}", r, e.step);
      if (e.kind == ChurnEvent::Kind::rejoin && !gone) {
        throw ConfigError(fmt::format("dist.churn: {} returns, but it has not left before", what));
      }
      if (e.kind != ChurnEvent::Kind::rejoin && gone) {
        throw ConfigError(fmt::format("dist.churn: {} {}, but it left earlier and has not returned",
                                      what, e.kind == ChurnEvent::Kind::leave ? "leaves" : "stalls"));
      }
      gone = e.kind == ChurnEvent::Kind::leave;
    }
  }
  return events;
}

std::vector<ChurnEvent> churn_events_of(const std::vector<ChurnEvent>& schedule, int replica) {
  std::vector<ChurnEvent> out;
  std::copy_if(schedule.begin(), schedule.end(), std::back_inserter(out),
               [&](const ChurnEvent& e) { return e.replica == replica; });
  // At one step a return comes first: "2@80:return, 2@80:leave" is back at 80, then gone again.
  std::stable_sort(out.begin(), out.end(), [](const ChurnEvent& a, const ChurnEvent& b) {
    if (a.step != b.step) return a.step < b.step;
    return a.kind == ChurnEvent::Kind::rejoin && b.kind != ChurnEvent::Kind::rejoin;
  });
  return out;
}

}  // namespace loco
