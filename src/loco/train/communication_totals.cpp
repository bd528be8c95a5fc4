#include "loco/train/communication_totals.h"

#include "loco/comm/group.h"

namespace loco {

CommunicationTotals::CommunicationTotals(nlohmann::json before, const comm::Group* group, const EmulatedClock& clock)
    : before_(std::move(before)), group_(group), clock_(clock) {}

nlohmann::json CommunicationTotals::now() const {
  nlohmann::json out = {{"sim_wall_s", before_.value("sim_wall_s", 0.0) + clock_.now()}};
  if (group_) {
    const comm::CommStats stats = group_->stats();
    out["bytes_sent"] = before_.value("bytes_sent", std::uint64_t{0}) + stats.bytes_sent;
    out["bytes_recv"] = before_.value("bytes_recv", std::uint64_t{0}) + stats.bytes_recv;
    out["comm_s"] = before_.value("comm_s", 0.0) + stats.blocked_s;
  }
  return out;
}

}  // namespace loco
