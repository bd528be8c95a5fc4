// The JSON of the membership messages (coordinator_server.h lists them), shared by the coordinator and
// its members so that both sides read and write one format. Reading never trusts the sender: a body that
// is not a JSON object, or a field that is missing or of the wrong type, is MembershipError(malformed).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "loco/membership/coordinator.h"
#include "loco/membership/membership_error.h"
#include "loco/monitor/metric_point.h"

namespace loco::membership {

nlohmann::json parse_message(const std::string& body);

// The field `name` of `message` as a T (std::string, bool, double, std::int64_t, std::uint64_t).
template <typename T>
T field(const nlohmann::json& message, const char* name);

Credentials credentials(const nlohmann::json& message);
// A vote's "rejected" (optional, member ids): whose pseudo-gradients the voter left out.
std::vector<std::string> rejected_members(const nlohmann::json& vote);
nlohmann::json to_json(const Credentials& who);
// A heartbeat's "metrics" (optional): the member's metric points since its last heartbeat, at most
// kMaxReportedPoints, each checked (monitor::parse_report).
std::vector<monitor::MetricPoint> reported_points(const nlohmann::json& heartbeat);

// A join's "pipeline" (optional: absent for a whole replica) and back; its fields are checked by the
// coordinator (Coordinator::join).
PipelinePlace pipeline_place(const nlohmann::json& join);
nlohmann::json to_json(const PipelinePlace& place);
// What a join's MAC covers as the member's name: the name, a pipeline stage's place and the digest of the
// member's settings (run_settings.h) with it (a place or settings changed on the way are refused like a
// forged name).
std::string signed_join_name(const std::string& name, const PipelinePlace& place,
                             const std::string& settings_digest = "");

nlohmann::json to_json(const PipelineReply& reply);
PipelineReply pipeline_reply(const nlohmann::json& message);

nlohmann::json to_json(const QuorumReply& reply);
QuorumReply quorum_reply(const nlohmann::json& message);

nlohmann::json to_json(const CommitReply& reply);
CommitReply commit_reply(const nlohmann::json& message);

// {"error": what, "refusal": kind} and back.
nlohmann::json refusal_message(const MembershipError& error);
MembershipError refusal_from(int http_status, const std::string& body);

}  // namespace loco::membership
