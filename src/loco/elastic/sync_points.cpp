#include "loco/elastic/sync_points.h"

#include <fmt/format.h>

#include <algorithm>

namespace loco::elastic {

SyncPoints::SyncPoints(SyncSchedule schedule) : schedule_(std::move(schedule)) {}

SyncPoints::SyncPoints(std::size_t fragments, std::int64_t every, std::int64_t total_steps)
    : schedule_(every, total_steps), fragments_(fragments), every_(every), total_steps_(total_steps) {}

std::vector<std::size_t> SyncPoints::due(std::int64_t step) const {
  if (fragments_ == 1) return schedule_.due(step) ? std::vector<std::size_t>{0} : std::vector<std::size_t>{};
  std::vector<std::size_t> out;
  if (step <= 0) return out;
  const std::int64_t spacing = every_ / static_cast<std::int64_t>(fragments_);
  for (std::size_t p = 0; p < fragments_; ++p) {
    if (step == total_steps_ || step % every_ == static_cast<std::int64_t>(p) * spacing) out.push_back(p);
  }
  return out;
}

std::int64_t SyncPoints::next_after(std::int64_t step) const {
  if (fragments_ == 1) return schedule_.next();
  for (std::int64_t t = step + 1; t < total_steps_; ++t) {
    if (!due(t).empty()) return t;
  }
  return std::max(step, total_steps_);
}

void SyncPoints::synced(std::int64_t step) { schedule_.synced(step); }

std::string SyncPoints::describe() const {
  if (fragments_ == 1) return schedule_.describe();
  return fmt::format("H={} fragments={} (in turn)", every_, fragments_);
}

}  // namespace loco::elastic
