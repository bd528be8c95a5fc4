// The communication counts of a run as metrics.jsonl and checkpoints report them (DESIGN.md §3
// "Metrics"): what the run had counted before this process started (a resumed checkpoint's
// "communication") plus what this process has counted since.
#pragma once

#include <nlohmann/json.hpp>

#include "loco/train/emulated_clock.h"

namespace loco {

class CommunicationTotals {
 public:
  // `group` is nullptr for a single replica (no bytes to count).
  CommunicationTotals(nlohmann::json before, const comm::Group* group, const EmulatedClock& clock);

  // {"sim_wall_s"} (note "emulated-wall-clock") and, with a group, {"bytes_sent", "bytes_recv", "comm_s"}.
  nlohmann::json now() const;

 private:
  nlohmann::json before_;
  const comm::Group* group_;
  const EmulatedClock& clock_;
};

}  // namespace loco
