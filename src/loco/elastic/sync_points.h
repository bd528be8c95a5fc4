// When an elastic member synchronises and which fragments of the model that synchronisation covers
// (elastic_diloco.h). One fragment: DiLoCo and Local SGD's schedule (algo/sync_schedule.h: every H steps
// or the QSR, and the last step). P fragments: Streaming DiLoCo (ALGORITHMS.md §4): fragment p after the
// steps t with t mod H = p·⌊H/P⌋, and every fragment at the last step, so that the final global
// parameters hold every member's work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loco/algo/sync_schedule.h"

namespace loco::elastic {

class SyncPoints {
 public:
  // One fragment on `schedule`.
  explicit SyncPoints(SyncSchedule schedule);
  // `fragments` fragments in turn, each every `every` steps, over `total_steps`.
  SyncPoints(std::size_t fragments, std::int64_t every, std::int64_t total_steps);

  // The fragments (ascending) to synchronise after `step` steps; empty: none.
  std::vector<std::size_t> due(std::int64_t step) const;
  // The next step after `step` at which some fragment is due (the caller caps it at the last step).
  std::int64_t next_after(std::int64_t step) const;
  // Records a synchronisation after `step` (the QSR picks its next H here).
  void synced(std::int64_t step);
  std::string describe() const;
  std::size_t fragments() const { return fragments_; }

  // The one-fragment schedule's next point, for checkpoints.
  std::int64_t saved_next() const { return schedule_.next(); }
  void restore_next(std::int64_t next) { schedule_.restore_next(next); }

 private:
  SyncSchedule schedule_;
  std::size_t fragments_ = 1;
  std::int64_t every_ = 0;  // fragments > 1
  std::int64_t total_steps_ = 0;
};

}  // namespace loco::elastic
