#include "loco/config/churn_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>

#include "loco/util/error.h"
#include "loco/util/portable_random.h"
#include "loco/util/seconds_since.h"

namespace loco {
namespace {

constexpr const char* kForms =
    "R@S:leave, R@T:return, R@S:stall=K or R@S:stall-until=T (replica R from 0, step S >= 1, K seconds, T > S)";

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

// The faults of "random:SEED[:FAULTS]" (churn_schedule.h), by step.
std::vector<ChurnEvent> random_churn(std::uint64_t seed, std::int64_t faults, std::int64_t replicas,
                                     std::int64_t steps) {
  std::vector<ChurnEvent> events;
  if (steps < 3 || replicas < 1) return events;  // no step with room for a fault and its return
  std::mt19937_64 rng(mix_seed(seed, 0x636875726e));  // "churn"
  struct Absence {
    std::int64_t replica, from, to;  // gone after step `from`, back at step `to`
  };
  std::vector<Absence> absences;
  const auto has_event_at = [&](std::int64_t r, std::int64_t step) {
    return std::any_of(events.begin(), events.end(), [&](const ChurnEvent& e) { return e.replica == r && e.step == step; });
  };
  const auto gone_during = [&](std::int64_t r, std::int64_t from, std::int64_t to) {  // any absence meeting [from, to]
    return std::any_of(absences.begin(), absences.end(),
                       [&](const Absence& a) { return a.replica == r && a.from <= to && from <= a.to; });
  };
  for (std::int64_t f = 0; f < faults; ++f) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const auto r = static_cast<std::int64_t>(uniform_below(rng, static_cast<std::uint64_t>(replicas)));
      const auto step = 1 + static_cast<std::int64_t>(uniform_below(rng, static_cast<std::uint64_t>(steps - 2)));
      const bool stall = uniform_below(rng, 2) == 0;
      if (stall) {
        const double seconds = 1.0 + static_cast<double>(uniform_below(rng, 5));
        if (has_event_at(r, step) || gone_during(r, step, step)) continue;
        events.push_back({static_cast<int>(r), step, ChurnEvent::Kind::stall, seconds});
        break;
      }
      const auto back = step + 1 + static_cast<std::int64_t>(uniform_below(rng, static_cast<std::uint64_t>(steps - 1 - step)));
      const bool busy_meanwhile = std::any_of(events.begin(), events.end(), [&](const ChurnEvent& e) {
        return e.replica == r && e.step >= step && e.step <= back;  // any event of r inside [step, back]
      });
      std::int64_t others_gone = 0;  // absences of other replicas meeting this one (an upper bound at any step)
      for (const Absence& a : absences) others_gone += a.replica != r && a.from <= back && step <= a.to ? 1 : 0;
      if (busy_meanwhile || gone_during(r, step, back) || others_gone + 1 >= replicas) continue;
      absences.push_back({r, step, back});
      events.push_back({static_cast<int>(r), step, ChurnEvent::Kind::leave, 0});
      events.push_back({static_cast<int>(r), back, ChurnEvent::Kind::rejoin, 0});
      break;
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const ChurnEvent& a, const ChurnEvent& b) {
    return a.step != b.step ? a.step < b.step : a.replica < b.replica;
  });
  return events;
}

std::vector<ChurnEvent> parse_events(const std::string& text, std::int64_t replicas, std::int64_t steps) {
  static const std::regex random_form(R"(random:([0-9]{1,19})(:([0-9]{1,4}))?)");
  std::smatch m;
  const auto first = text.find_first_not_of(" \t");
  const std::string trimmed = first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(" \t") - first + 1);
  if (std::regex_match(trimmed, m, random_form)) {
    // Each fault is drawn again until it clashes with none before it (up to 100 tries), against every
    // event so far: quadratic in the faults, so their number is bounded (a chaos schedule needs far fewer).
    constexpr std::int64_t kMaxRandomFaults = 1000;
    const std::int64_t faults = m[3].matched ? std::stoll(m[3]) : replicas;
    if (faults > kMaxRandomFaults) {
      throw ConfigError(fmt::format("dist.churn: '{}' asks for {} faults{}; a random schedule draws at most {}: "
                                    "write random:SEED:FAULTS with fewer",
                                    trimmed, faults, m[3].matched ? "" : " (one per replica)", kMaxRandomFaults));
    }
    return random_churn(std::stoull(m[1]), faults, replicas, steps);
  }
  if (trimmed.rfind("random", 0) == 0) {
    throw ConfigError(fmt::format("dist.churn: '{}' is not a random schedule; write random:SEED or "
                                  "random:SEED:FAULTS (e.g. random:7:4)",
                                  trimmed));
  }
  static const std::regex form(
      R"(([0-9]{1,6})@([0-9]{1,12}):(leave|return|stall=([0-9]+(\.[0-9]*)?)|stall-until=([0-9]{1,12})))");
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
    if (m[4].matched) e.seconds = std::strtod(m[4].str().c_str(), nullptr);  // beyond a double: HUGE_VAL, refused
    if (m[6].matched) e.until_step = std::stoll(m[6]);
    if (e.replica >= replicas) {
      throw ConfigError(fmt::format(
          "dist.churn: '{}' names replica {}, but dist.replicas is {} (replicas count from 0)", item, e.replica,
          replicas));
    }
    if (e.step < 1) throw ConfigError(fmt::format("dist.churn: '{}': steps count from 1", item));
    // A fault after the run's last step would never happen, and the run would be taken for one that survived it.
    if (e.step > steps) {
      throw ConfigError(
          fmt::format("dist.churn: '{}' is at step {}, after the run's last step {} (train.steps): it "
                      "would never happen; give a step from 1 to {}",
                      item, e.step, steps, steps));
    }
    // Bounded as comm.timeout_s: a stall of 10^11 s overflowed the heartbeat pause's nanoseconds (never paused).
    if (m[4].matched && !(e.seconds > 0 && e.seconds <= kLongestWaitSeconds)) {
      throw ConfigError(fmt::format("dist.churn: '{}': a stall lasts a positive number of seconds, at most {:g} "
                                    "(11.6 days)",
                                    item, kLongestWaitSeconds));
    }
    if (m[6].matched && (e.until_step <= e.step || e.until_step > steps)) {
      throw ConfigError(fmt::format("dist.churn: '{}': a stall lasts until a step after {} and at most the run's "
                                    "{} (train.steps)",
                                    item, e.step, steps));
    }
    events.push_back(e);
  }
  return events;
}

}  // namespace

std::vector<ChurnEvent> parse_churn_schedule(const std::string& text, std::int64_t replicas, std::int64_t steps) {
  const std::vector<ChurnEvent> events = parse_events(text, replicas, steps);
  // Each replica's story must make sense in step order: present → leave → return → present ... Only the
  // replicas the schedule names have one (not every replica of a run that may have thousands).
  std::set<int> named;
  for (const ChurnEvent& e : events) named.insert(e.replica);
  for (const int r : named) {
    bool gone = false;
    for (const ChurnEvent& e : churn_events_of(events, r)) {
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

std::string format_churn_schedule(const std::vector<ChurnEvent>& events) {
  std::string out;
  for (const ChurnEvent& e : events) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}@{}:", e.replica, e.step);
    out += e.kind == ChurnEvent::Kind::leave    ? std::string("leave")
           : e.kind == ChurnEvent::Kind::rejoin ? std::string("return")
           : e.until_step > 0                   ? fmt::format("stall-until={}", e.until_step)
                                                : fmt::format("stall={}", e.seconds);
  }
  return out;
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
