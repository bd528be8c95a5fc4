#include "loco/sim/analytic_model.h"

#include <algorithm>

#include "loco/sim/collective_cost.h"

namespace loco::sim {

namespace {

// Communication seconds per step that the compute does not hide.
double communication_per_step_s(const Scenario& s, const AlgorithmSpec& a) {
  const double bits = a.exchange_bits(s);
  if (a.kind == Algorithm::kDataParallel) {
    return ring_allreduce(s.params, bits, s.workers, s.inter).total_s();
  }
  const double inner = ring_allreduce(s.params, s.bits, workers_per_replica(s), s.intra).total_s();
  if (s.replicas == 1) return inner;
  const double fragment_values = s.params / a.fragments;
  const double sync_s = a.kind == Algorithm::kNoLoCo
                            ? pairwise_exchange(fragment_values, bits, s.inter).total_s()
                            : ring_allreduce(fragment_values, bits, s.workers, s.inter).total_s();
  const double exposed_s = std::max(0.0, sync_s - a.overlap_steps * s.step_time_s);
  return inner + a.fragments * exposed_s / a.inner_steps;
}

}  // namespace

Utilisation analytic_utilisation(const Scenario& s, const AlgorithmSpec& a) {
  validate(s);
  validate(a, s);
  validate_inter_bandwidth(s.inter.bandwidth_bps);
  const double wall_s = s.step_time_s + communication_per_step_s(s, a);
  return {s.step_time_s / wall_s, s.step_time_s, wall_s};
}

}  // namespace loco::sim
