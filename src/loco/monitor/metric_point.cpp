#include "loco/monitor/metric_point.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace loco::monitor {

namespace {

constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

std::optional<std::int64_t> step_of(const nlohmann::json& record) {
  const auto found = record.find("step");
  if (found == record.end() || !found->is_number_integer()) return std::nullopt;
  const auto step = found->get<std::int64_t>();
  if (step < 0 || step > kMaxReportedStep) return std::nullopt;
  return step;
}

}  // namespace

std::optional<MetricPoint> point_from_record(const nlohmann::json& record) {
  if (!record.is_object()) return std::nullopt;
  const auto step = step_of(record);
  if (!step) return std::nullopt;
  MetricPoint point;
  point.step = *step;
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto found = record.find(std::string(kMetricNames[i]));
    const bool usable = found != record.end() && found->is_number() && std::isfinite(found->get<double>());
    point.values[i] = usable ? found->get<double>() : kAbsent;
  }
  return point;
}

nlohmann::json report_json(const MetricPoint& point) {
  nlohmann::json out = {{"step", point.step}};
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    if (!std::isnan(point.values[i])) out[std::string(kMetricNames[i])] = point.values[i];
  }
  return out;
}

MetricPoint parse_report(const nlohmann::json& report) {
  if (!report.is_object()) throw std::invalid_argument("a reported metrics point is not a JSON object");
  const auto step = step_of(report);
  if (!step) {
    throw std::invalid_argument(
        fmt::format("a reported metrics point has no integer \"step\" in [0, {}]", kMaxReportedStep));
  }
  for (const std::string_view name : kMetricNames) {
    const auto found = report.find(std::string(name));
    if (found != report.end() && !(found->is_number() && std::isfinite(found->get<double>()))) {
      throw std::invalid_argument(fmt::format("a reported metrics point's \"{}\" is not a finite number", name));
    }
  }
  return *point_from_record(report);
}

}  // namespace loco::monitor
