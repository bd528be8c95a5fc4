// DiLoCo (docs/algorithm-reference.md §1–§3), Local SGD (§6) and Streaming DiLoCo (§4): one strategy, the
// outer step over P' fragments of the model, for static and elastic runs alike (note "membership").
//
// Every replica runs inner AdamW steps on its own data. Fragment p synchronises after the steps t that
// SyncPoints names (every H steps, or the QSR's H for Local SGD; with P' fragments, in turn at
// t mod H = p·⌊H/P'⌋; every fragment at the run's last step T):
//
//     Δ_m,p = θ_g,p − θ_m,p                        this replica's pseudo-gradient
//     Δ_p   = Σ_m w_m·Δ_m,p / Σ_m w_m              pseudo_gradient_average.h over the participants (or
//                                                  dist.aggregation's robust rule), through the codec;
//                                                  w_m = 1, the tokens trained since the last outer step
//                                                  with diloco.weighted, 0 when dropped (diloco.drop_rate)
//                                                  or when the member's state was just healed
//     b_p   ← μ·b_p + Δ_p                          OuterNesterov (PyTorch Nesterov, b starts at 0)
//     θ̃_p   = θ_g,p − η·(Δ_p + μ·b_p);  θ_g,p ← θ̃_p      (a replica alone, blocking, computes it as
//                                                    θ_m,p + (Δ_m,p − η·(Δ_p + μ·b_p)): OuterNesterov::step_alone)
//     θ_m,p ← θ̃_p                                  τ = 0: the exchange blocks
//     θ_m,p ← α·θ_m,p + (1 − α)·θ̃_p               τ > 0: the exchange runs while τ more inner steps do,
//                                                  and the outer step lands after step t + τ
//
// SparseLoCo (§12) is the same outer step with μ = 0, but replica m exchanges a sparse, quantised part of
// an error-feedback accumulator instead of Δ_m,p (sparse_exchange.h):
//
//     e_m,p ← β·e_m,p + Δ_m,p;  s_m,p = Q(TopK_tile(e_m,p));  e_m,p ← e_m,p − s_m,p
//     θ_g,p ← θ_g,p − η·aggregate_m(s_m,p)        the mean over the replicas that sent a coordinate
//
// e stands in for the outer momentum; it is each replica's own (checkpointed with it, never compared), and
// it changes only when the outer step commits.
//
// AdamW's state is kept, never reset or averaged. Local SGD is η = 1, μ = 0 (θ_g becomes the replicas'
// average); P' = 1 with τ = 0 is DiLoCo; P' = 1 with τ > 0 is overlapped DiLoCo. At T the exchanges in
// flight land first, then every fragment synchronises once more and lands at T (those T's schedule names
// with their mix), so that the final θ_g holds every replica's work. streaming.overlap_auto chooses each
// fragment's τ from measured times (overlap_tuner.h).
//
// The participants of each synchronisation come from the membership (train/membership.h). With a quorum
// membership, an outer step is computed on copies and applied only once the vote commits it; an attempt
// that fails keeps this replica's Δ and is tried again, blocking, with the next participants.
#pragma once

#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "loco/algo/link_timeline.h"
#include "loco/algo/outer_nesterov.h"
#include "loco/algo/overlap_tuner.h"
#include "loco/algo/parameter_fragment.h"
#include "loco/algo/pseudo_gradient_average.h"
#include "loco/algo/sparse_exchange.h"
#include "loco/algo/sync_points.h"
#include "loco/comm/codecs/codec.h"
#include "loco/train/membership.h"
#include "loco/train/strategy.h"
#include "loco/util/serial_worker.h"

namespace loco {

// The settings of one member of the family, gathered from its config section (make_strategy.cpp).
struct OuterStepSettings {
  std::string name;  // "diloco", "localsgd", "streaming" or "sparseloco", for logs
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  bool weighted = false;  // diloco.weighted
  double drop_rate = 0;   // diloco.drop_rate
  // Streaming's fragments (block_fragments); streaming = false: the whole model as one fragment.
  bool streaming = false;
  std::int64_t fragments = 1;
  bool strided = true;
  bool embeddings_fragment = false;
  std::int64_t overlap = 0;  // τ
  bool overlap_auto = false;
  double mix = 0.5;  // α
  // The replicas are threads of one process: τ auto measures on the emulated clock (overlap_tuner.h).
  bool simulated_replicas = false;
  // SparseLoCo: sparse contributions of an error-feedback accumulator instead of Δ; nullopt: Δ itself.
  std::optional<SparseSettings> sparse;
};

// Local SGD's outer step as DiLoCo's: η = 1, μ = 0, unweighted, nothing dropped.
OuterStepSettings local_sgd_settings();

class Diloco final : public Strategy {
 public:
  // `points` must expect as many fragments as `settings` make. `context.membership` must be set.
  Diloco(OuterStepSettings settings, const ExchangeConfig& exchange, SyncPoints points, const ReplicaContext& context);
  ~Diloco() override;

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void begin() override;
  void after_step(std::int64_t step) override;
  bool synchronised_at(std::int64_t step) const override { return met_at_ == step; }
  bool exchanging() const override { return !in_flight_.empty(); }
  void settle_exchanges() override;
  void with_evaluation_parameters(const std::function<void()>& evaluate) override;
  void add_log_fields(nlohmann::json& record) override;
  NamedTensors state_tensors() const override;
  nlohmann::json state_json() const override;
  nlohmann::json schedule_of(const nlohmann::json& saved) const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  // A saved exchange's fragment and steps, checked (CheckpointError).
  std::size_t saved_fragment(const nlohmann::json& saved, const SafetensorsContent& tensors) const;
  std::int64_t saved_step(const nlohmann::json& saved, const char* key, const SafetensorsContent& tensors) const;
  // An exchange's weight as saved (`fallback` when a checkpoint of an older version has none): no negative one.
  double saved_weight(const nlohmann::json& saved, const char* key, const SafetensorsContent& tensors,
                      std::optional<double> fallback = std::nullopt) const;
  // One fragment's exchange of one synchronisation.
  struct Exchange {
    std::uint64_t sync = 0;  // the synchronisation it belongs to (its exchanges commit together)
    std::int64_t point = 0;  // t: the step that synchronisation began at
    std::size_t fragment = 0;
    std::int64_t apply_after = 0;  // the step after which its outer step lands: t + τ, at most T
    bool mix = false;              // θ_m,p ← α·θ_m,p + (1 − α)·θ̃_p rather than θ̃_p
    Participants who;              // the participants it was exchanged with
    torch::Tensor delta;           // this replica's Δ, kept for another attempt while the membership may abort
    torch::Tensor alone_local;     // θ_m of a blocking first attempt of a replica alone (OuterNesterov::step_alone)
    std::optional<double> weight;  // this replica's weight in the average (nullopt: all count alike)
    torch::Tensor mean;            // the average, once `done` (the background job writes it)
    std::future<void> done;        // invalid: not exchanged yet
    struct Result {
      PseudoGradientAverage averaged;  // Σ weight of the replicas in the average, and the rejected
      torch::Tensor accumulator;       // SparseLoCo: this replica's e after it, taken when it commits
      double emulated_s = 0;           // link time the exchange was charged
      ExchangeTiming timing;           // τ auto's measurement of it
    };
    std::shared_ptr<Result> result = std::make_shared<Result>();
    double started_at = 0;  // emulated time it started on the link
    bool on_link = false;   // its link time is queued on link_ (blocking exchanges, at once)
  };

  Membership::Synchronisation synchronisation();
  // One attempt at the synchronisation at who.step (note "membership").
  bool attempt(const Participants& who);
  // The exchanges of the fragments due at who.step, begun with `who`.
  std::vector<Exchange> start(const Participants& who);
  // This replica's weight in the average of `fragment` (nullopt: every replica counts alike).
  std::optional<double> weight(const Participants& who, std::size_t fragment) const;
  // Whether replica `rank`'s Δ is left out of its outer step `outer_step` (seeded, the same on a rerun).
  bool dropped(int rank, std::int64_t outer_step) const;
  // Whether dropped() left out every replica of `group` at this fragment's outer step.
  bool every_replica_dropped(const comm::Group& group, std::size_t fragment) const;
  // Bytes each replica encodes for an exchange of `fragment`.
  std::int64_t exchange_bytes(std::size_t fragment) const;
  // Starts `x`'s exchange with x.who: in the background when there is a worker, else now.
  void exchange(Exchange& x);
  // The averaging of x's Δ (in x.mean) with x.who, as a job holding everything it reads: through the
  // codec, or SparseLoCo's exchange from this replica's accumulator.
  std::function<void()> averaging(const Exchange& x, std::string what) const;
  // The exchanges kept from an attempt that failed (or from a checkpoint), exchanged again with `who`.
  bool retry(const Participants& who);
  // Keeps the exchanges of a synchronisation that did not commit, to go again at the next one.
  void keep_for_retry(std::vector<Exchange> xs);
  // `xs`, one synchronisation's exchanges begun with `who`: in flight when their outer step comes later,
  // else finished now (kept for the next attempt when not committed). Whether the attempt is done.
  bool land(std::vector<Exchange> xs, const Participants& who);
  // Waits for `xs` (one synchronisation's), then commits and applies their outer steps. False: nothing was
  // applied (the caller keeps `xs` for the next attempt).
  bool finish(std::vector<Exchange>& xs);
  // The exchanges in flight whose outer step is due after `step`, finished in order; one that is not
  // committed is retried, blocking, with the next participants.
  void finish_due(std::int64_t step);
  // After a completed synchronisation of `point` with `who`: the round of training that follows.
  void begin_round(const Participants& who, std::int64_t point, RoundStart start = RoundStart::fresh);
  // Every fragment's (θ_g, b) as a checkpoint names them; `candidates[p]`, where set, in place of fragment p's.
  NamedTensors outer_state(const std::vector<std::optional<OuterNesterov>>& candidates = {}) const;
  std::string fragment_prefix(std::size_t fragment) const;
  // The exchanges not yet committed: in flight, then kept for another attempt.
  std::vector<const Exchange*> uncommitted() const;
  // Runs `wait` (for the background thread) and counts it as time the training waited for `group`.
  void wait_for_background(comm::Group& group, const std::function<void()>& wait) const;
  // Runs `job` on the group's user: the background thread when there is one (it owns the group while
  // exchanges may be queued), else here.
  void on_group_thread(comm::Group& group, const std::function<void()>& job);

  OuterStepSettings settings_;
  ExchangeConfig exchange_;
  SyncPoints points_;
  ReplicaContext context_;
  Membership& membership_;
  LinkTimeline link_;
  std::unique_ptr<comm::Codec> codec_;
  std::vector<ParameterFragment> fragments_;
  std::vector<OuterNesterov> outer_;
  std::vector<SparseLayout> sparse_layouts_;  // SparseLoCo: per fragment
  std::vector<torch::Tensor> accumulators_;   // SparseLoCo: e per fragment; replaced, never written in place
  std::vector<std::int64_t> outer_steps_;  // per fragment
  std::vector<std::int64_t> overlap_;      // per fragment: τ of its next exchange
  std::int64_t tokens_since_sync_ = 0;
  std::uint64_t syncs_begun_ = 0;
  std::deque<Exchange> in_flight_;     // exchanged or exchanging, in the order they were begun
  std::int64_t met_at_ = -1;           // the last step after which the replicas met (synchronised_at)
  std::vector<Exchange> to_retry_;     // one synchronisation's, kept from an attempt that failed
  std::optional<OverlapTuner> tuner_;  // streaming.overlap_auto
  // Last member, so destroyed first: queued exchanges finish (or fail) before the tensors they write go.
  std::unique_ptr<SerialWorker> background_;
};

}  // namespace loco
