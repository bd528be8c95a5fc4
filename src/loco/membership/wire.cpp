#include "loco/membership/wire.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "loco/util/json_nesting.h"

namespace loco::membership {

namespace {

const char* type_name(const std::string*) { return "a string"; }
const char* type_name(const bool*) { return "true or false"; }
const char* type_name(const double*) { return "a number"; }
const char* type_name(const std::int64_t*) { return "an integer from -2^63 to 2^63 - 1"; }
const char* type_name(const std::uint64_t*) { return "a non-negative integer"; }

bool holds(const nlohmann::json& v, const std::string*) { return v.is_string(); }
bool holds(const nlohmann::json& v, const bool*) { return v.is_boolean(); }
bool holds(const nlohmann::json& v, const double*) { return v.is_number() && std::isfinite(v.get<double>()); }
// An unsigned number above 2^63 - 1 is no int64 (it would read as a negative one).
bool holds(const nlohmann::json& v, const std::int64_t*) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX));
}
bool holds(const nlohmann::json& v, const std::uint64_t*) { return v.is_number_unsigned(); }

std::vector<std::string> string_list(const nlohmann::json& message, const char* name) {
  const auto list = message.find(name);
  if (list == message.end() || !list->is_array()) {
    throw MembershipError(Refusal::malformed, fmt::format("field '{}' is missing or not an array", name));
  }
  std::vector<std::string> out;
  for (const auto& item : *list) {
    if (!item.is_string()) {
      throw MembershipError(Refusal::malformed, fmt::format("field '{}' holds a value that is not a string", name));
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

// The string `name` of a body that may be anything (a refusal comes from whoever answered), else `fallback`.
std::string string_or(const nlohmann::json& message, const char* name, const std::string& fallback) {
  const bool found = message.is_object() && message.contains(name) && message[name].is_string();
  return found ? message[name].get<std::string>() : fallback;
}

const char* refusal_name(Refusal refusal) {
  switch (refusal) {
    case Refusal::malformed: return "malformed";
    case Refusal::wrong_run: return "wrong_run";
    case Refusal::unknown_member: return "unknown_member";
    case Refusal::stale_incarnation: return "stale_incarnation";
    case Refusal::stale_quorum: return "stale_quorum";
    case Refusal::unavailable: return "unavailable";
    case Refusal::unauthenticated: return "unauthenticated";
    case Refusal::barred: return "barred";
  }
  return "unknown";
}

}  // namespace

nlohmann::json parse_message(const std::string& body) {
  // loco's messages nest a few levels; deeper is a peer's attempt on the parser's memory.
  constexpr std::size_t kDeepestMessage = 32;
  if (json_nesting(body, kDeepestMessage) > kDeepestMessage) {
    throw MembershipError(Refusal::malformed,
                          fmt::format("the message nests arrays and objects more than {} levels deep, which no "
                                      "message of loco does",
                                      kDeepestMessage));
  }
  nlohmann::json message = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    throw MembershipError(Refusal::malformed,
                          "the message is not valid JSON (NaN, Infinity and numbers beyond "
                          "double's range are not JSON)");
  }
  if (!message.is_object()) {
    throw MembershipError(Refusal::malformed, "the message is not a JSON object");
  }
  return message;
}

template <typename T>
T field(const nlohmann::json& message, const char* name) {
  const auto found = message.find(name);
  if (found == message.end() || !holds(*found, static_cast<const T*>(nullptr))) {
    throw MembershipError(Refusal::malformed, fmt::format("field '{}' is missing or not {}", name,
                                                          type_name(static_cast<const T*>(nullptr))));
  }
  return found->get<T>();
}

template std::string field<std::string>(const nlohmann::json&, const char*);
template bool field<bool>(const nlohmann::json&, const char*);
template double field<double>(const nlohmann::json&, const char*);
template std::int64_t field<std::int64_t>(const nlohmann::json&, const char*);
template std::uint64_t field<std::uint64_t>(const nlohmann::json&, const char*);

Credentials credentials(const nlohmann::json& message) {
  return {field<std::string>(message, "member_id"), field<std::uint64_t>(message, "incarnation")};
}

nlohmann::json to_json(const Credentials& who) {
  return {{"member_id", who.member_id}, {"incarnation", who.incarnation}};
}

std::vector<std::string> rejected_members(const nlohmann::json& vote) {
  return vote.contains("rejected") ? string_list(vote, "rejected") : std::vector<std::string>{};
}

std::vector<monitor::MetricPoint> reported_points(const nlohmann::json& heartbeat) {
  const auto found = heartbeat.find("metrics");
  if (found == heartbeat.end()) return {};
  if (!found->is_array() || found->size() > kMaxReportedPoints) {
    throw MembershipError(Refusal::malformed, fmt::format("a heartbeat's \"metrics\" must be an array of at most {} "
                                                          "points",
                                                          kMaxReportedPoints));
  }
  std::vector<monitor::MetricPoint> points;
  for (const auto& report : *found) {
    try {
      points.push_back(monitor::parse_report(report));
    } catch (const std::invalid_argument& e) {
      throw MembershipError(Refusal::malformed, e.what());
    }
  }
  return points;
}

PipelinePlace pipeline_place(const nlohmann::json& join) {
  const auto found = join.find("pipeline");
  if (found == join.end()) return {};
  if (!found->is_object()) throw MembershipError(Refusal::malformed, "field 'pipeline' is not an object");
  PipelinePlace place;
  place.unit = field<std::string>(*found, "replica");
  const auto stage = field<std::int64_t>(*found, "stage"), stages = field<std::int64_t>(*found, "stages");
  if (stages < 1 || stages > kMaxStages || stage < 0 || stage >= stages) {
    throw MembershipError(Refusal::malformed, fmt::format("a pipeline place of stage {} of {} stages (1 to {} stages, "
                                                          "a stage below their number)",
                                                          stage, stages, kMaxStages));
  }
  place.stage = static_cast<int>(stage);
  place.stages = static_cast<int>(stages);
  return place;
}

nlohmann::json to_json(const PipelinePlace& place) {
  return {{"replica", place.unit}, {"stage", place.stage}, {"stages", place.stages}};
}

std::string signed_join_name(const std::string& name, const PipelinePlace& place, const std::string& settings_digest) {
  std::string signed_name = name;
  if (place.stages > 1) signed_name += fmt::format("|{}|{}|{}", place.unit, place.stage, place.stages);
  if (!settings_digest.empty()) signed_name += "|settings:" + settings_digest;
  return signed_name;
}

nlohmann::json to_json(const PipelineReply& reply) {
  return {{"members", reply.members}, {"store_prefix", reply.store_prefix}};
}

PipelineReply pipeline_reply(const nlohmann::json& message) {
  PipelineReply reply;
  reply.members = string_list(message, "members");
  reply.store_prefix = field<std::string>(message, "store_prefix");
  if (reply.members.empty() || reply.members.size() > static_cast<std::size_t>(kMaxStages)) {
    throw MembershipError(Refusal::malformed, "a pipeline reply must name 1 to 1024 members");
  }
  return reply;
}

nlohmann::json to_json(const QuorumReply& reply) {
  return {{"quorum_id", reply.quorum_id},
          {"incarnation", reply.incarnation},
          {"members", reply.members},
          {"rank", reply.rank},
          {"store_prefix", reply.store_prefix},
          {"step", reply.step},
          {"steps", reply.steps},
          {"serial", reply.serial},
          {"run_finished", reply.run_finished}};
}

nlohmann::json to_json(const CommitReply& reply) {
  return {{"outcome", outcome_name(reply.outcome)},
          {"canonical_hash", reply.canonical_hash},
          {"heal", reply.heal},
          {"outliers", reply.outliers},
          {"reason", reply.reason}};
}

CommitReply commit_reply(const nlohmann::json& message) {
  CommitReply reply;
  const std::string outcome = field<std::string>(message, "outcome");
  if (outcome == "commit") {
    reply.outcome = Outcome::commit;
  } else if (outcome == "abort") {
    reply.outcome = Outcome::abort;
  } else {
    throw MembershipError(Refusal::malformed, fmt::format("outcome '{}' is neither commit nor abort", outcome));
  }
  reply.canonical_hash = field<std::string>(message, "canonical_hash");
  reply.heal = field<bool>(message, "heal");
  reply.reason = field<std::string>(message, "reason");
  reply.outliers = string_list(message, "outliers");
  return reply;
}

QuorumReply quorum_reply(const nlohmann::json& message) {
  QuorumReply reply;
  reply.quorum_id = field<std::int64_t>(message, "quorum_id");
  reply.incarnation = field<std::uint64_t>(message, "incarnation");
  const std::int64_t rank = field<std::int64_t>(message, "rank");  // checked below, before it becomes an int
  reply.store_prefix = field<std::string>(message, "store_prefix");
  reply.step = field<std::int64_t>(message, "step");
  reply.serial = field<std::int64_t>(message, "serial");
  reply.members = string_list(message, "members");
  const auto finished = message.find("run_finished");  // absent from older coordinators: false
  if (finished != message.end()) {
    if (!finished->is_boolean()) throw MembershipError(Refusal::malformed, "field 'run_finished' is not a boolean");
    reply.run_finished = finished->get<bool>();
  }
  const auto steps = message.find("steps");
  if (steps == message.end() || !steps->is_array() || steps->size() != reply.members.size()) {
    throw MembershipError(Refusal::malformed, "field 'steps' is missing or not one integer per member");
  }
  for (const auto& step : *steps) {
    if (!step.is_number_integer()) throw MembershipError(Refusal::malformed, "field 'steps' holds a non-integer");
    reply.steps.push_back(step.get<std::int64_t>());
  }
  if (rank < 0 || rank >= static_cast<std::int64_t>(reply.members.size())) {
    throw MembershipError(Refusal::malformed, fmt::format("rank {} is outside the quorum's {} members", rank,
                                                          reply.members.size()));
  }
  reply.rank = static_cast<int>(rank);
  return reply;
}

nlohmann::json refusal_message(const MembershipError& error) {
  return {{"error", error.what()}, {"refusal", refusal_name(error.refusal())}};
}

MembershipError refusal_from(int http_status, const std::string& body) {
  const nlohmann::json message = nlohmann::json::parse(body, nullptr, false);
  const std::string what = string_or(message, "error", fmt::format("HTTP status {}", http_status));
  const std::string kind = string_or(message, "refusal", "");
  for (Refusal r : {Refusal::malformed, Refusal::wrong_run, Refusal::unknown_member, Refusal::stale_incarnation,
                    Refusal::stale_quorum, Refusal::unauthenticated, Refusal::barred}) {
    if (kind == refusal_name(r)) return MembershipError(r, what);
  }
  return MembershipError(Refusal::unavailable, what);
}

}  // namespace loco::membership
