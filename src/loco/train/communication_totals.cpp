#include "loco/train/communication_totals.h"

#include "loco/comm/group.h"

namespace loco {

CommunicationTotals::CommunicationTotals(nlohmann::json before, const comm::Group* group,
                                         std::function<comm::CommStats()> counted, const EmulatedClock& clock)
    : before_(std::move(before)), group_(group), counted_(std::move(counted)), clock_(clock) {}

nlohmann::json CommunicationTotals::now() const {
  nlohmann::json out = {{"sim_wall_s", before_.value("sim_wall_s", 0.0) + clock_.now()}};
  if (counted_) {
    const comm::CommStats stats = counted_();
    out["bytes_sent"] = before_.value("bytes_sent", std::uint64_t{0}) + stats.bytes_sent;
    out["bytes_recv"] = before_.value("bytes_recv", std::uint64_t{0}) + stats.bytes_recv;
    out["comm_s"] = before_.value("comm_s", 0.0) + stats.blocked_s;
  }
  if (group_) {
    if (const auto pacing = group_->last_pacing()) {
      out["round_kib"] = static_cast<double>(pacing->round_bytes) / 1024;
      out["rounds_in_flight"] = pacing->in_flight;
      if (pacing->from != comm::Pacing::From::nothing) {
        out["link_mbps"] = pacing->link.bandwidth_bps / 1e6;
        out["link_ms"] = pacing->link.latency_s * 1e3;
      }
    }
  }
  return out;
}

std::optional<std::string> CommunicationTotals::pacing_change() {
  const auto pacing = group_ ? group_->last_pacing() : std::nullopt;
  if (!pacing) return std::nullopt;
  std::string described = pacing->describe();
  if (described == reported_pacing_) return std::nullopt;
  reported_pacing_ = described;
  return described;
}

}  // namespace loco
