// The dashboard's memory of a run (docs/dashboard.md): one series of metric points per member (or run
// directory), bounded however long the run trains and however often its members report.
//
// A series keeps every `stride`-th point it is given (stride 1 at first) and, after them, the newest point
// whatever its index, so that the chart always ends where the run is. When `capacity` points are kept, every
// other one is dropped and the stride doubles: the series stays even over the whole run (after 100K logged
// lines a series of capacity 2,048 keeps one line in 64) and never exceeds capacity + 1 points. Past
// `max_series` series, the one updated longest ago is dropped. So the memory is at most
// max_series × (capacity + 1) × sizeof a stored point, whatever the steps (memory_bytes() says how much it is).
//
// Every stored point carries a sequence number, increasing across series, so that a page asks only for what
// it has not seen (since()).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loco/monitor/metric_point.h"

namespace loco::monitor {

class MetricsHistory {
 public:
  static constexpr std::size_t kDefaultCapacity = 2048;
  static constexpr std::size_t kDefaultMaxSeries = 256;
  static constexpr std::size_t kMaxPointsPerAnswer = 16384;  // ~3 MB of JSON

  explicit MetricsHistory(std::size_t capacity = kDefaultCapacity, std::size_t max_series = kDefaultMaxSeries);

  void add(const std::string& series, const MetricPoint& point);
  // Forgets a series (a run directory whose metrics.jsonl was rewritten by a resume).
  void clear(const std::string& series);

  // The points stored after sequence number `after`, per series in columns:
  //   {"seq": the last sequence number, "series": [{"name": …, "step": […], "time_s": […], "loss": […], …}],
  //    "more": whether points after "seq" were left for the next call}
  // (null where a point has no such value). after = 0: everything stored, at most `max_points` at a time (the
  // oldest first): a full history (256 series of 2,049 points) is ~100 MB of JSON, too much for one answer,
  // of which several may be in flight.
  nlohmann::json since(std::uint64_t after, std::size_t max_points = kMaxPointsPerAnswer) const;
  // The newest point of `series`.
  std::optional<MetricPoint> latest(const std::string& series) const;
  std::size_t series_count() const { return series_.size(); }
  std::vector<std::string> names() const;
  std::size_t points(const std::string& series) const;
  // The bytes the stored points take (their vectors' capacity), for the documented bound.
  std::size_t memory_bytes() const;

 private:
  struct Stored {
    std::uint64_t seq;
    MetricPoint point;
  };

  std::size_t capacity_;
  std::size_t max_series_;
  struct Series {
    std::vector<Stored> points;
    std::uint64_t stride = 1;
    std::uint64_t offered = 0;      // points given so far
    bool newest_off_stride = false;  // the last point is kept only as the newest: the next one replaces it
  };

  std::uint64_t next_seq_ = 1;
  std::map<std::string, Series> series_;
};

}  // namespace loco::monitor
