// The per-layer schedule simulator of docs/algorithm-reference.md §4: one worker's compute stream and its two
// links, replayed step by step until the schedule repeats, then measured.
//
// Nodes, per step and per layer l (N/L values each):
//   forward(l)        layers 0..L-1 in order; waits for every update of layer l due at this step
//   backward-act(l)   layers L-1..0, then backward-weights(l): layer l's gradient is ready
//   inner reduction   all-reduce of l's gradient among the replica's R/M workers (intra link);
//                     the inner optimizer then updates l, which the next step's forward(l) needs
//   outer reduction   when l's fragment synchronises after this step: l's (outer) gradient goes over
//                     the inter-replica link as soon as it is ready, so it overlaps the rest of
//                     the backward pass; the result is merged before forward(l) of step s + 1 + τ
// Data parallel reduces every layer every step across replicas (after the inner reduction), τ = 0.
// DiLoCo and NoLoCo are one fragment holding every layer; Streaming DiLoCo has P strided fragments
// (layer l in fragment l mod P) whose synchronisations are spread evenly over the H steps.
// Each link carries one transfer at a time, in the order they are issued. Compute and the two
// links run in parallel. Utilisation = compute time / wall time over whole periods of H steps.
#pragma once

#include "loco/sim/algorithm_spec.h"
#include "loco/sim/scenario.h"

namespace loco::sim {

struct Utilisation {
  double utilisation = 0;  // compute_s / wall_s
  double compute_s = 0;
  double wall_s = 0;
};

// Simulates at the scenario's inter-replica bandwidth. Throws ConfigError on impossible inputs.
Utilisation simulate_schedule(const Scenario& scenario, const AlgorithmSpec& algorithm);

// What one simulate_schedule replays: steps (two periods of warm-up, then whole periods, at least 8 steps) times
// layers, the measure of its work.
double schedule_layer_steps(const Scenario& scenario, const AlgorithmSpec& algorithm);

// Layer-steps one replay may take: beyond it a single simulation takes seconds, and the bandwidth search runs
// dozens of them.
inline constexpr double kMaxReplayLayerSteps = 2e7;
// Layer-steps the command's replays may take together (about a minute on a 2-core VM, at 2.7e-8 s each): the
// bandwidth search replays each algorithm dozens of times, and targets, algorithms and sweep points multiply it.
inline constexpr double kMaxTotalLayerSteps = 2e9;

}  // namespace loco::sim
