#include "loco/sim/collective_cost.h"

namespace loco::sim {

CollectiveTime ring_allreduce(double values, double bits, int participants, const Link& link) {
  if (participants <= 1) return {};
  double p = participants;
  return {2 * values * bits * (p - 1) / p / link.bandwidth_bps, link.latency_s};
}

CollectiveTime pairwise_exchange(double values, double bits, const Link& link) {
  return {2 * values * bits / link.bandwidth_bps, link.latency_s};
}

}  // namespace loco::sim
