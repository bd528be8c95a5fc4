#include "loco/monitor/metrics_history.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace loco::monitor {

MetricsHistory::MetricsHistory(std::size_t capacity, std::size_t max_series)
    : capacity_(capacity), max_series_(max_series) {
  if (capacity < 2 || max_series < 1) throw std::invalid_argument("MetricsHistory needs capacity >= 2, max_series >= 1");
}

void MetricsHistory::add(const std::string& series, const MetricPoint& point) {
  auto found = series_.find(series);
  if (found == series_.end()) {
    if (series_.size() == max_series_) {
      const auto stalest = std::min_element(series_.begin(), series_.end(), [](const auto& a, const auto& b) {
        return a.second.points.back().seq < b.second.points.back().seq;
      });
      series_.erase(stalest);
    }
    found = series_.emplace(series, Series()).first;
    found->second.points.reserve(capacity_ + 1);
  }
  Series& s = found->second;
  if (s.newest_off_stride) s.points.pop_back();
  if (s.offered % s.stride == 0 && s.points.size() == capacity_) {
    // Kept point i is given point i·stride: keeping the even ones doubles the stride evenly.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < s.points.size(); i += 2) s.points[kept++] = s.points[i];
    s.points.resize(kept);
    s.stride *= 2;
  }
  s.newest_off_stride = s.offered % s.stride != 0;
  s.points.push_back({next_seq_++, point});
  ++s.offered;
}

void MetricsHistory::clear(const std::string& series) { series_.erase(series); }

namespace {

// The first point of `points` (in sequence order) after sequence number `after`.
template <typename Stored>
typename std::vector<Stored>::const_iterator first_after(const std::vector<Stored>& points, std::uint64_t after) {
  return std::upper_bound(points.begin(), points.end(), after,
                          [](std::uint64_t seq, const Stored& s) { return seq < s.seq; });
}

}  // namespace

nlohmann::json MetricsHistory::since(std::uint64_t after, std::size_t max_points) const {
  // The answer ends at sequence number `last`: all points after `after` when they are few enough, else the
  // max_points oldest of them.
  std::vector<std::uint64_t> pending;
  for (const auto& [name, s] : series_) {
    for (auto it = first_after(s.points, after); it != s.points.end(); ++it) pending.push_back(it->seq);
  }
  std::uint64_t last = next_seq_ - 1;
  const bool more = pending.size() > max_points && max_points > 0;
  if (more) {
    std::nth_element(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(max_points - 1), pending.end());
    last = pending[max_points - 1];
  }
  nlohmann::json out_series = nlohmann::json::array();
  for (const auto& [name, s] : series_) {
    const auto first = first_after(s.points, after);
    const auto end = first_after(s.points, last);
    if (first == end) continue;
    nlohmann::json steps = nlohmann::json::array(), times = nlohmann::json::array();
    std::vector<nlohmann::json> columns(kMetricCount, nlohmann::json::array());
    for (auto it = first; it != end; ++it) {
      steps.push_back(it->point.step);
      times.push_back(it->point.time_s);
      for (std::size_t i = 0; i < kMetricCount; ++i) {
        const double v = it->point.values[i];
        columns[i].push_back(std::isnan(v) ? nlohmann::json() : nlohmann::json(v));
      }
    }
    nlohmann::json entry = {{"name", name}, {"step", std::move(steps)}, {"time_s", std::move(times)}};
    for (std::size_t i = 0; i < kMetricCount; ++i) entry[std::string(kMetricNames[i])] = std::move(columns[i]);
    out_series.push_back(std::move(entry));
  }
  return {{"seq", last}, {"series", std::move(out_series)}, {"more", more}};
}

std::optional<MetricPoint> MetricsHistory::latest(const std::string& series) const {
  const auto found = series_.find(series);
  if (found == series_.end()) return std::nullopt;
  return found->second.points.back().point;
}

std::vector<std::string> MetricsHistory::names() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : series_) out.push_back(name);
  return out;
}

std::size_t MetricsHistory::points(const std::string& series) const {
  const auto found = series_.find(series);
  return found == series_.end() ? 0 : found->second.points.size();
}

std::size_t MetricsHistory::memory_bytes() const {
  std::size_t bytes = 0;
  for (const auto& [name, s] : series_) bytes += s.points.capacity() * sizeof(Stored) + name.capacity();
  return bytes;
}

}  // namespace loco::monitor
