// Streaming DiLoCo (ALGORITHMS.md §4): DiLoCo's outer step (§1) applied to P fragments of the model
// at staggered times, with the exchange overlapping inner steps and sent through a 4-bit codec.
//
//   fragments      block l → fragment l mod P (strided) or consecutive blocks (sequential); the
//                  embeddings may form fragment P (parameter_fragment.h). Each fragment p has its
//                  own θ_g,p and Nesterov buffer b_p (OuterNesterov).
//   schedule       fragment p sends after steps t with t mod H = p·⌊H/P'⌋ (P' fragments in all),
//                  so some fragment syncs every H/P' steps and peak traffic drops by ~P'.
//   at step t      Δ_p = θ_g,p − θ_m,p is quantised and averaged in the background (SerialWorker,
//                  replica_mean: fp32 accumulation, no per-hop re-quantisation) while τ more inner
//                  steps run; after step t + τ:
//                      θ̃_p   = θ_g,p − η·(Δ_p + μ·b_p),  b_p ← μ·b_p + Δ_p     (OuterNesterov::step)
//                      θ_g,p ← θ̃_p
//                      θ_m,p ← α·θ_m,p + (1 − α)·θ̃_p      (τ > 0; with τ = 0, θ_m,p ← θ̃_p)
//   last step T    exchanges in flight are applied as above; then every fragment that did not send
//                  at T syncs once more with τ = 0, so the final θ_g holds every replica's work.
//   τ auto         streaming.overlap_auto: each fragment's τ is chosen from the measured times of its
//                  own exchanges and the inner steps (note "overlap-auto", algo/overlap_auto.h; fragments
//                  differ in size); streaming.overlap is τ until then.
//
// τ = 0, P = 1 and codec fp32 is DiLoCo exactly (same replica_mean, same outer step, same schedule).
// P = 1 with τ > 0 is overlapped DiLoCo: DiLoCo whose outer update lands τ steps after its exchange
// starts (a one-step-delayed outer update when τ = 1), mixed with the replica's own progress meanwhile.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "loco/algo/link_timeline.h"
#include "loco/algo/outer_nesterov.h"
#include "loco/algo/overlap_auto.h"
#include "loco/algo/parameter_fragment.h"
#include "loco/comm/codecs/codec.h"
#include "loco/train/strategy.h"
#include "loco/util/serial_worker.h"

namespace loco {

class StreamingDiloco final : public Strategy {
 public:
  // `simulated_replicas`: the replicas are threads of one process (dist.backend = "local"), so their links
  // exist only in the link model (note "overlap-auto").
  StreamingDiloco(const StreamingConfig& config, const ExchangeConfig& exchange, const ReplicaContext& context,
                  bool simulated_replicas);
  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void after_step(std::int64_t step) override;
  void with_evaluation_parameters(const std::function<void()>& evaluate) override;
  NamedTensors state_tensors() const override;
  nlohmann::json state_json() const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  struct Exchange {
    std::size_t fragment;
    std::int64_t apply_after;  // step t + τ
    torch::Tensor delta;       // averaged in place by the background job
    std::future<void> done;
    std::shared_ptr<double> emulated_s;  // link time the job was charged, set by the job
    double started_at;                   // emulated time it started on the link
    std::shared_ptr<double> contributed;  // Σ weight of the replicas in the average, set by the job (0: skip)
    bool mix;                             // τ > 0: mix θ_m,p with the result
    std::shared_ptr<ExchangeTiming> timing;  // streaming.overlap_auto: timing_across's, set by the job
  };

  bool sends_at(std::size_t fragment, std::int64_t step) const;
  // Starts fragment `fragment`'s exchange of its Δ after step `step`, to be applied after step `apply_after`.
  void send(std::size_t fragment, std::int64_t step, std::int64_t apply_after);
  // Waits for the oldest exchange and applies it.
  void apply_oldest();
  // The sends and applications due after step `step`.
  void exchange_after_step(std::int64_t step);
  // Bytes each replica encodes for an exchange of `fragment`.
  std::int64_t exchange_bytes(std::size_t fragment) const;
  // Takes up the τ that `timing` of an exchange of `fragment` calls for (note "overlap-auto"); `source`
  // names where a predicted E came from ("" for a measured one).
  void adopt_overlap(std::size_t fragment, const ExchangeTiming& timing, const std::string& source);
  // adopt_overlap for a measured exchange, remembered for predictions.
  void adopt_measured_overlap(std::size_t fragment, const ExchangeTiming& timing);
  // Before `fragment` first sends: τ from a predicted E (note "overlap-auto", first exchanges).
  void predict_first_overlap(std::size_t fragment);
  // s as the replicas agreed it last, or agreed now (an all-gather); 0 while no step was measured.
  double agreed_step_seconds();
  // Seconds on the clock that τ auto measures with: emulated for simulated replicas behind an emulated
  // link, wall time otherwise.
  double now() const;
  // Runs `wait` for a job of the background thread and counts it as time the training waited for
  // communication (comm::BackgroundWaits: the job's own waits are not).
  void wait_for_background(const std::function<void()>& wait) const;

  StreamingConfig config_;
  ExchangeConfig exchange_;
  ReplicaContext context_;
  LinkTimeline link_;
  std::unique_ptr<comm::Codec> codec_;
  std::vector<ParameterFragment> fragments_;
  std::vector<OuterNesterov> outer_;
  std::vector<std::int64_t> outer_steps_;  // per fragment
  std::deque<Exchange> in_flight_;
  std::vector<std::int64_t> overlap_;  // per fragment: τ of its next exchange
  bool emulated_clock_;  // τ auto measures on the emulated clock
  StepDurations steps_;                 // since the last send (τ auto)
  struct FragmentExchange {
    std::size_t fragment;
    MeasuredExchange exchange;
  };
  std::optional<FragmentExchange> last_measured_;  // the last exchange τ auto measured (any fragment)
  std::optional<double> agreed_step_s_;            // s the replicas last agreed on (τ auto)
  std::optional<double> last_step_end_;  // now() when the last after_step returned (τ auto)
  // Last member, so destroyed first: queued exchanges finish (or fail) before the tensors they write go.
  std::unique_ptr<SerialWorker> background_;
};

}  // namespace loco
