// The communication counts of a run as metrics.jsonl and checkpoints report them (docs/design.md §3
// "Metrics"): what the run had counted before this process started (a resumed checkpoint's
// "communication") plus what this process has counted since.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

#include "loco/comm/comm_stats.h"
#include "loco/train/emulated_clock.h"

namespace loco {

class CommunicationTotals {
 public:
  // `group` is the run's (nullptr for a single replica or an elastic member, whose groups change);
  // `counted` what the replica's groups counted so far (empty: no bytes to count).
  CommunicationTotals(nlohmann::json before, const comm::Group* group, std::function<comm::CommStats()> counted,
                      const EmulatedClock& clock);

  // {"sim_wall_s"} (note "emulated-wall-clock") and, with counts, {"bytes_sent", "bytes_recv", "comm_s"};
  // with a group, once a paced exchange ran, how the last one was cut (comm::Pacing): {"round_kib" (0: one
  // round), "rounds_in_flight"} and, where a link sized them, {"link_mbps", "link_ms"}.
  nlohmann::json now() const;
  // The last exchange's pacing, described, when it differs from what this returned before (for the log).
  std::optional<std::string> pacing_change();

 private:
  nlohmann::json before_;
  const comm::Group* group_;
  std::function<comm::CommStats()> counted_;
  const EmulatedClock& clock_;
  std::optional<std::string> reported_pacing_;
};

}  // namespace loco
