// The analytic wall-clock model of docs/algorithm-reference.md §3 (Charles et al. 2025, Appendix A), per step:
//
//   compute               = step time (6·N·B / (R·Q) when derived from the batch)
//   data parallel         = all-reduce(N) among all R workers over the inter-replica link
//   DiLoCo, M ≥ 2         = all-reduce(N) among the R/M workers of a replica (intra link)
//                           + all-reduce(N) among all R workers (inter link) every H steps
//   Streaming DiLoCo      = the same inner term + P fragment all-reduces of N/P values every H
//                           steps, each hidden behind τ steps of compute: max(0, t − τ·step)
//   NoLoCo                = the inner term + a pairwise exchange of N values every H steps
//
// with all-reduce(n) = 2·n·b·(1 − 1/p)/W + ε. Nothing overlaps except what τ hides.
// Utilisation = compute / (compute + communication).
#pragma once

#include "loco/sim/algorithm_spec.h"
#include "loco/sim/scenario.h"
#include "loco/sim/schedule_sim.h"

namespace loco::sim {

Utilisation analytic_utilisation(const Scenario& scenario, const AlgorithmSpec& algorithm);

}  // namespace loco::sim
