// When the DiLoCo family synchronises and which fragments of the model each synchronisation covers, for
// static and elastic runs alike. One fragment (DiLoCo, Local SGD): the schedule of sync_schedule.h, every
// H steps or the QSR's H. P' fragments (Streaming DiLoCo, docs/algorithm-reference.md §4): fragment p after
// the steps t with t mod H = p·⌊H/P'⌋. Every fragment at the run's last step, so that the final global
// parameters hold every replica's work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loco/algo/sync_schedule.h"

namespace loco {

class SyncPoints {
 public:
  // One fragment on `schedule`.
  explicit SyncPoints(SyncSchedule schedule);
  // `fragments` fragments in turn, each every `every` steps, over `total_steps` (one fragment: every H steps,
  // a rule that needs no saved next point).
  SyncPoints(std::size_t fragments, std::int64_t every, std::int64_t total_steps);

  // Whether the schedule itself names fragment `fragment` at `step` (the last step aside).
  bool scheduled(std::size_t fragment, std::int64_t step) const;
  // The fragments (ascending) to synchronise after `step` steps: the scheduled ones, and every fragment at
  // the last step. Empty: none.
  std::vector<std::size_t> due(std::int64_t step) const;
  // The next step after `step` at which some fragment is due, at most the last step.
  std::int64_t next_after(std::int64_t step) const;
  // Records a synchronisation after `step` (the QSR picks its next H here).
  void synced(std::int64_t step);
  std::string describe() const;  // "H=100" or "QSR(H_base=4, alpha=0.2)"
  std::size_t fragments() const { return fragments_; }
  // H of fragments in turn (0 on a schedule).
  std::int64_t every() const { return every_; }

  // The one-fragment schedule's next point, for checkpoints.
  std::int64_t saved_next() const { return schedule_.next(); }
  void restore_next(std::int64_t next) { schedule_.restore_next(next); }

 private:
  SyncSchedule schedule_;
  std::size_t fragments_ = 1;
  std::int64_t every_ = 0;  // fragments in turn; 0: on schedule_
  std::int64_t total_steps_;
};

}  // namespace loco
