// What a training process shows of one metrics line on the live dashboard (docs/dashboard.md): its step and a
// few numbers of the metrics.jsonl record, by the same names. An elastic member reports them to its
// coordinator with its heartbeats (membership/member_client.h); `loco dashboard` reads them from run
// directories. Both read a record with point_from_record; the coordinator checks what a member sent with
// parse_report, because a member's message is input like any other.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loco::monitor {

// The numbers of a point besides its step, in the order of MetricPoint::values: tokens seen, training loss,
// validation loss (on evaluation steps), throughput, bytes sent and received so far, communication time
// training waited for (exposed), seconds since the process started, outer steps, heals (the elastic member
// adopted a donor's state), and comm.round_kib's last choice (pacing).
inline constexpr std::array<std::string_view, 11> kMetricNames = {
    "tokens", "loss", "eval_loss", "tokens_per_s", "bytes_sent", "bytes_recv",
    "comm_s", "elapsed_s", "outer_steps", "heals", "round_kib"};
inline constexpr std::size_t kMetricCount = kMetricNames.size();

// The index of `name` in kMetricNames (a name not there does not compile where used as a constant).
constexpr std::size_t metric_index(std::string_view name) {
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    if (kMetricNames[i] == name) return i;
  }
  throw "not a reported metric";
}

// Steps beyond this are refused: 2^40 optimizer steps, 35 years at one a millisecond.
inline constexpr std::int64_t kMaxReportedStep = std::int64_t{1} << 40;

struct MetricPoint {
  std::int64_t step = 0;
  // The x of "against wall clock": when the coordinator received it (its clock, seconds), or the line's
  // elapsed_s in a run directory.
  double time_s = 0;
  std::array<double, kMetricCount> values{};  // NaN where the line had no such number
};

// The point of a metrics.jsonl record: its step and the named fields that are finite numbers. nullopt when the
// record has no step in [0, kMaxReportedStep].
std::optional<MetricPoint> point_from_record(const nlohmann::json& record);

// A point as a member reports it: {"step": …, name: value, …}, absent values left out (time_s too: the
// coordinator stamps its own).
nlohmann::json report_json(const MetricPoint& point);

// A member's report, checked: an object with an integer "step" in [0, kMaxReportedStep] and, of the named
// fields, only finite numbers; other fields are ignored (a newer member may report more). std::invalid_argument
// naming the problem otherwise.
MetricPoint parse_report(const nlohmann::json& report);

}  // namespace loco::monitor
