// Runs a sweep (sweep_plan.h): each run is `loco train` (under `loco launch` for gloo/nccl runs) in a
// process of its own, then `loco eval` of its final checkpoint, `jobs` runs at a time; with [best], the
// best run of each cell is then run again with each repeat value. A run's result
// (OUT/NAME/sweep_result.json) is written last and atomically, so an interrupted sweep (Ctrl-C, a crash, a
// reboot) redoes only the runs without one; a run's output goes to OUT/NAME.log. At the end every run
// with a result is listed in OUT/summary.csv and OUT/summary.jsonl, and with [best] every cell in
// OUT/cells.csv and OUT/cells.jsonl; `loco fit` reads either.
#pragma once

#include <string>

#include "loco/sweep/sweep_plan.h"
#include "loco/util/run_program.h"

namespace loco {

struct SweepOptions {
  std::string loco;  // the loco executable that trains and evaluates (the running one)
  int jobs = 0;      // runs at a time; 0: the plan's
  // The runs' processes: stopping them (a SIGTERM to the sweep) stops the runs in progress, each as loco
  // train stops (at its next step, with a checkpoint), and starts no other. Null: not stoppable.
  StoppablePrograms* programs = nullptr;
};

// Returns how many runs failed (each named on stderr with its log); runs a stop ended are not counted.
int run_sweep(const SweepPlan& plan, const SweepOptions& options);

// The tables of the runs of `plan` that have a result (sweep_runner.h's header; columns: docs/sweep.md).
// Returns how many runs summary.csv lists.
int write_sweep_summary(const SweepPlan& plan);

}  // namespace loco
