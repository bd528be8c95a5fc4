#include "loco/membership/status_client.h"

#include <fmt/format.h>

#include <chrono>

#include "loco/membership/authentication.h"
#include "loco/membership/bounded_request.h"
#include "loco/membership/membership_error.h"
#include "loco/membership/untrusted_text.h"
#include "loco/membership/wire.h"
#include "loco/util/json_problem.h"

namespace loco::membership {

namespace {

// GET /status on a fresh connection, answered in full within `timeout_s` (bounded_request.h).
nlohmann::json get_status(const CoordinatorAddress& at, const std::vector<std::pair<std::string, std::string>>& headers,
                          double timeout_s) {
  std::string why_not;
  const auto answer = bounded_request(at, "GET", "/status", headers, "", timeout_s, why_not);
  if (!answer || answer->status != 200) {
    throw MembershipError(Refusal::unavailable,
                          fmt::format("no status from the coordinator at {}:{} ({}): is it running there? (loco "
                                      "coordinator prints its address when it starts)",
                                      at.host, at.port, answer ? fmt::format("HTTP {}", answer->status) : why_not));
  }
  try {
    return parse_message(answer->body);
  } catch (const MembershipError& e) {
    throw MembershipError(Refusal::malformed,
                          fmt::format("the answer at {}:{} to GET /status is not a coordinator's status ({}): is a "
                                      "loco coordinator answering at that address?",
                                      at.host, at.port, e.what()));
  }
}

std::string seconds(const nlohmann::json& value) {
  return value.is_number() ? fmt::format("{:.1f} s", value.get<double>()) : "-";
}

// A member's reported number `name` with `digits` decimals, "-" when it reported none.
std::string number(const nlohmann::json& metrics, const char* name, int digits) {
  const auto found = metrics.find(name);
  return found != metrics.end() && found->is_number() ? fmt::format("{:.{}f}", found->get<double>(), digits) : "-";
}

// The status as text (format_status), assuming every field has its type: a mismatch throws the json
// library's exception.
std::string format_checked_status(const nlohmann::json& status, std::size_t events) {
  std::string out = fmt::format(
      "run {} (coordinator incarnation {}): furthest step {}{}, quorum q{} of {} member(s){}\n",
      loggable(status.value("run_id", std::string("?"))), status.value("incarnation", 0ull),
      status.value("furthest_step", std::int64_t{0}), status.value("finished", false) ? ", finished" : "",
      status.at("quorum").value("id", std::int64_t{0}), status.at("quorum").value("members", nlohmann::json::array()).size(),
      status.at("quorum").value("broken", false) ? " (broken)" : "");
  out += fmt::format("{:<24} {:<8} {:>10} {:>8} {:>10} {:>7} {:>14} {:>12}\n", "member", "state", "step", "loss",
                     "tokens/s", "quorum", "heartbeat age", "member for");
  bool anyone_waits = false;
  for (const auto& m : status.at("members")) {
    const std::string state = !m.value("healthy", false) ? "silent" : m.at("waiting_s").is_number() ? "waiting" : "training";
    anyone_waits = anyone_waits || state == "waiting";
    const nlohmann::json metrics = m.value("metrics", nlohmann::json::object());
    out += fmt::format("{:<24} {:<8} {:>10} {:>8} {:>10} {:>7} {:>14} {:>12}\n", loggable(m.value("id", std::string("?"))),
                       state, m.value("step", std::int64_t{0}), number(metrics, "loss", 4), number(metrics, "tokens_per_s", 0),
                       fmt::format("q{}", m.value("quorum_id", std::int64_t{0})),
                       seconds(m.value("heartbeat_age_s", nlohmann::json())),
                       seconds(m.value("member_for_s", nlohmann::json())));
  }
  // Why no quorum forms, while someone waits for one (a member that resumed nothing, a missing replica).
  const std::string why = status.value("waiting_for", std::string());
  if (anyone_waits && !why.empty()) out += fmt::format("waiting for {}\n", loggable(why));
  const auto& all = status.at("events");
  const std::size_t first = all.size() > events ? all.size() - events : 0;
  if (first < all.size()) out += "last events:\n";
  for (std::size_t i = first; i < all.size(); ++i) {
    const auto& e = all[i];
    out += fmt::format("  {:>9} {:<7} {}\n", seconds(e.value("time_s", nlohmann::json())),
                       loggable(e.value("kind", std::string())), loggable(e.value("detail", std::string())));
  }
  return out;
}

}  // namespace

RunProgress run_progress(const CoordinatorAddress& at, double timeout_s) {
  const nlohmann::json status = get_status(at, {}, timeout_s);
  try {
    return {status.at("furthest_step").get<std::int64_t>(), status.at("finished").get<bool>()};
  } catch (const nlohmann::json::exception& e) {
    throw MembershipError(Refusal::malformed, fmt::format("the coordinator at {}:{} sent a status without the run's "
                                                          "progress ({})",
                                                          at.host, at.port, json_problem(e)));
  }
}

nlohmann::json run_status(const CoordinatorAddress& at, const std::string& secret, double timeout_s) {
  const nlohmann::json open = get_status(at, {}, timeout_s);
  const auto run_id = open.contains("run_id") && open.at("run_id").is_string() ? open.at("run_id").get<std::string>()
                                                                              : std::string();
  nlohmann::json full = get_status(at, {{kStatusTokenHeader, status_token(secret, run_id)}}, timeout_s);
  // Without the token a coordinator answers counts only ("members": a number): the secret was not this run's.
  if (!full.is_object() || !full.contains("members") || !full.at("members").is_array()) {
    throw MembershipError(Refusal::unauthenticated,
                          fmt::format("the coordinator at {}:{} (run {}) does not take the status token of this "
                                      "secret: give the run's secret (LOCO_RUN_SECRET_FILE or LOCO_RUN_SECRET)",
                                      at.host, at.port, loggable(run_id)));
  }
  // Another server that answers /status with members (loco dashboard does) is no coordinator: its status has no
  // quorum. Said here, for --json too, which prints the status as it came.
  if (!full.contains("quorum") || !full.at("quorum").is_object() || !full.contains("events") ||
      !full.at("events").is_array()) {
    throw MembershipError(Refusal::malformed,
                          fmt::format("the server at {}:{} answers GET /status without a quorum and its events: it is "
                                      "not a loco coordinator (a loco dashboard?). Give the coordinator's address",
                                      at.host, at.port));
  }
  return full;
}

std::string format_status(const nlohmann::json& status, std::size_t events) {
  try {
    return format_checked_status(status, events);
  } catch (const nlohmann::json::exception& e) {
    // Whatever answers at the address may send anything: a field of another type is a refusal, not a crash.
    throw MembershipError(Refusal::malformed,
                          fmt::format("the coordinator sent a status loco cannot read ({}); is a loco coordinator of "
                                      "this version answering at that address?",
                                      loggable(json_problem(e))));
  }
}

}  // namespace loco::membership
