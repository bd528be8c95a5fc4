#include "loco/algo/sync_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "loco/train/schedule.h"

namespace loco {

SyncSchedule::SyncSchedule(std::int64_t every, std::int64_t total_steps)
    : every_(every), total_steps_(total_steps), next_(every) {}

SyncSchedule::SyncSchedule(std::int64_t base_every, double qsr_alpha, const OptimConfig& optim,
                           std::int64_t total_steps)
    : every_(base_every), qsr_alpha_(qsr_alpha), optim_(optim), total_steps_(total_steps) {
  next_ = interval_after(0);
}

std::int64_t SyncSchedule::interval_after(std::int64_t step) const {
  if (qsr_alpha_ <= 0 || step < optim_.warmup_steps) return every_;
  const double lr = learning_rate(optim_, step, total_steps_);
  const double quadratic = std::floor((qsr_alpha_ / lr) * (qsr_alpha_ / lr));
  const double capped = std::min(quadratic, static_cast<double>(total_steps_ - step));
  return std::max(every_, static_cast<std::int64_t>(capped));
}

std::string SyncSchedule::describe() const {
  if (qsr_alpha_ <= 0) return fmt::format("H={}", every_);
  return fmt::format("QSR(H_base={}, alpha={})", every_, qsr_alpha_);
}

void SyncSchedule::synced(std::int64_t step) { next_ = step + interval_after(step); }

}  // namespace loco
