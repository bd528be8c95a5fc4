#include "loco/sim/schedule_sim.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "loco/sim/collective_cost.h"
#include "loco/util/error.h"

namespace loco::sim {

namespace {

// One link: transfers start in the order they are issued, each once the link is free and its data
// is ready. Returns when the result is available at the other end.
class SerialLink {
 public:
  double transfer(double ready_s, const CollectiveTime& time) {
    if (time.total_s() == 0) return ready_s;
    double start = std::max(free_at_s_, ready_s);
    free_at_s_ = start + time.busy_s;
    return free_at_s_ + time.latency_s;
  }

 private:
  double free_at_s_ = 0;
};

// An update of one layer that forward(layer) of `due_step` must wait for.
struct PendingUpdate {
  long due_step;
  double ready_s;
};

// Waits (advances `now_s`) for the updates of a layer due by `step`, and drops them.
void wait_for_updates(std::vector<PendingUpdate>& pending, long step, double& now_s) {
  auto due = [step](const PendingUpdate& u) { return u.due_step <= step; };
  for (const auto& update : pending) {
    if (due(update)) now_s = std::max(now_s, update.ready_s);
  }
  pending.erase(std::remove_if(pending.begin(), pending.end(), due), pending.end());
}

}  // namespace

double schedule_layer_steps(const Scenario& s, const AlgorithmSpec& a) {
  const double period = static_cast<double>(a.inner_steps);
  return (2 * period + period * std::ceil(8 / period)) * s.layers;
}

Utilisation simulate_schedule(const Scenario& s, const AlgorithmSpec& a) {
  validate(s);
  validate(a, s);
  validate_inter_bandwidth(s.inter.bandwidth_bps);

  const int layers = s.layers;
  const double layer_values = s.params / layers;
  const double forward_s = s.step_time_s * s.forward_share / layers;
  const double backward_activations_s = s.step_time_s * (1 - s.forward_share) / 2 / layers;
  const double backward_weights_s = backward_activations_s;
  const CollectiveTime inner = ring_allreduce(layer_values, s.bits, workers_per_replica(s), s.intra);
  const CollectiveTime outer = a.kind == Algorithm::kNoLoCo
                                   ? pairwise_exchange(layer_values, a.exchange_bits(s), s.inter)
                                   : ring_allreduce(layer_values, a.exchange_bits(s), s.replicas, s.inter);

  // The schedule repeats every H steps; after a warm-up of two periods the measured window is
  // whole periods, at least 8 steps.
  const long period = a.inner_steps;
  const long warmup_steps = 2 * period;
  const long measured_steps = period * ((8 + period - 1) / period);
  const long last_step = warmup_steps + measured_steps;
  if (schedule_layer_steps(s, a) > kMaxReplayLayerSteps) {
    throw ConfigError(
        fmt::format("{} with H = {} and {} layers is too long to replay step by step ({} "
                    "layer-steps); use --model analytic, or fewer layers or a smaller H.",
                    a.label(), a.inner_steps, layers, schedule_layer_steps(s, a)));
  }

  std::vector<std::vector<PendingUpdate>> pending(layers);
  SerialLink intra_link, inter_link;
  double now_s = 0, measure_start_s = 0;
  for (long step = 0;; ++step) {
    for (int layer = 0; layer < layers; ++layer) {
      wait_for_updates(pending[layer], step, now_s);
      if (layer == 0 && step == warmup_steps) measure_start_s = now_s;
      if (layer == 0 && step == last_step) {
        double compute_s = measured_steps * s.step_time_s;
        double wall_s = now_s - measure_start_s;
        return {compute_s / wall_s, compute_s, wall_s};
      }
      now_s += forward_s;
    }
    for (int layer = layers - 1; layer >= 0; --layer) {
      now_s += backward_activations_s;
      now_s += backward_weights_s;
      double updated_s = intra_link.transfer(now_s, inner);
      long due_step = step + 1;
      bool sync = a.kind == Algorithm::kDataParallel || syncs_after_step(a, fragment_of_layer(a, layer), step);
      if (sync) {
        pending[layer].push_back({due_step, updated_s});  // the inner update, merged next step
        updated_s = inter_link.transfer(updated_s, outer);
        due_step += a.overlap_steps;
      }
      pending[layer].push_back({due_step, updated_s});
    }
  }
}

}  // namespace loco::sim
