// When a DiLoCo-family strategy synchronises: every H inner steps, or with the Quadratic
// Synchronisation Rule (docs/algorithm-reference.md §6) an H recomputed at every sync from the inner learning rate,
//
//     H = max(H_base, floor((α / lr_t)²)),   capped by the steps left; H = H_base during warmup,
//
// and always at the run's last step, so that the final global parameters hold every replica's work.
#pragma once

#include <cstdint>
#include <string>

#include "loco/config/run_config.h"

namespace loco {

class SyncSchedule {
 public:
  // Fixed H.
  SyncSchedule(std::int64_t every, std::int64_t total_steps);
  // QSR with base H and α over the inner schedule of `optim`.
  SyncSchedule(std::int64_t base_every, double qsr_alpha, const OptimConfig& optim, std::int64_t total_steps);

  // Whether to sync after `step` inner steps.
  bool due(std::int64_t step) const { return step == next_ || step == total_steps_; }
  // Records a sync after `step` and fixes the next one.
  void synced(std::int64_t step);
  // The H chosen at `step` (QSR) or the fixed H.
  std::int64_t interval_after(std::int64_t step) const;

  std::int64_t next() const { return next_; }
  std::int64_t total_steps() const { return total_steps_; }
  std::string describe() const;  // "H=100" or "QSR(H_base=4, alpha=0.2)"
  void restore_next(std::int64_t next) { next_ = next; }

 private:
  std::int64_t every_;
  double qsr_alpha_ = 0;  // 0: fixed H
  OptimConfig optim_;
  std::int64_t total_steps_;
  std::int64_t next_;
};

}  // namespace loco
