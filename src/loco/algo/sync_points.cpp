#include "loco/algo/sync_points.h"

#include <fmt/format.h>

#include <algorithm>

namespace loco {

SyncPoints::SyncPoints(SyncSchedule schedule) : schedule_(std::move(schedule)), total_steps_(schedule_.total_steps()) {}

SyncPoints::SyncPoints(std::size_t fragments, std::int64_t every, std::int64_t total_steps)
    : schedule_(every, total_steps), fragments_(fragments), every_(every), total_steps_(total_steps) {}

bool SyncPoints::scheduled(std::size_t fragment, std::int64_t step) const {
  if (every_ == 0) return step == schedule_.next();
  const std::int64_t spacing = every_ / static_cast<std::int64_t>(fragments_);
  return step > 0 && step % every_ == static_cast<std::int64_t>(fragment) * spacing;
}

std::vector<std::size_t> SyncPoints::due(std::int64_t step) const {
  std::vector<std::size_t> out;
  if (step <= 0) return out;
  for (std::size_t p = 0; p < fragments_; ++p) {
    if (step == total_steps_ || scheduled(p, step)) out.push_back(p);
  }
  return out;
}

std::int64_t SyncPoints::next_after(std::int64_t step) const {
  if (every_ == 0) return std::min(schedule_.next(), total_steps_);
  for (std::int64_t t = step + 1; t < total_steps_; ++t) {
    if (!due(t).empty()) return t;
  }
  return std::max(step, total_steps_);
}

void SyncPoints::synced(std::int64_t step) { schedule_.synced(step); }

std::string SyncPoints::describe() const {
  if (every_ == 0) return schedule_.describe();
  return fmt::format("H={}", every_);
}

}  // namespace loco
