// Elastic DiLoCo, Local SGD and Streaming DiLoCo (docs/fault-tolerance.md "Elastic DiLoCo"): the outer
// step of algo/diloco.h (ALGORITHMS.md §1, §6; per fragment for Streaming, §4) over whichever members form
// the quorum at each synchronisation, committed in two phases, with members that are behind healed from a
// live one. One synchronisation, of the fragments F due at this step t (sync_points.h: the whole model for
// DiLoCo and Local SGD, fragments in turn for Streaming):
//
//   Δ_p = θ_g,p − θ_m,p for p in F                the same at every retry (θ_m does not change meanwhile)
//   loop:
//     q   = the quorum at this step                QuorumGroup::join_quorum (a new group when q is new)
//     heal: if a member's step is behind q's      the members' SHA-256 of (θ_g, b) are gathered; the
//                                                 lowest-ranked up-to-date member holding the most common
//                                                 one sends its whole replica state in checked chunks
//                                                 (note "elastic-heal", state_transfer.h); the members
//                                                 behind or unlike it check it against that hash, adopt
//                                                 it and contribute weight 0 this time
//     Δ̄_p = Σ w_m·Δ_m,p / Σ w_m over q            one exchange for all of F, on a scratch copy (an
//                                                 abandoned all-reduce may still write); or dist.aggregation's
//                                                 robust rule, whose rejected members (NaN or Inf) the vote
//                                                 reports: the coordinator removes one rejected repeatedly
//     θ_g,p' , b_p' = Nesterov(θ_g,p, b_p, Δ̄_p)    on copies (OuterNesterov)
//     vote(ok, SHA-256 of every (θ_g', b'))        commit: θ_g,p ← θ_g,p', b_p ← b_p', θ_m,p ← θ_g,p; members
//                                                 whose hash differs take θ_g, b from the lowest-ranked
//                                                 canonical one
//                                                 abort, or a failed collective: nothing applied; retry
//                                                 coordinator replaced before deciding: presumed commit
//
// Note "elastic-overlap" (Streaming DiLoCo with τ > 0, §4 point 2; one fragment with τ > 0 is DiLoCo with
// a delayed outer step): at a synchronisation point t before the last step, the quorum, the heal and Δ
// are as above, but the exchange runs on a background thread while τ more inner steps run. After step
// t + τ:
//
//     Δ̄ arrived: θ̃_p, b_p' as above, vote         commit: θ_g,p ← θ̃_p, b_p ← b_p',
//                                                         θ_m,p ← α·θ_m,p + (1 − α)·θ̃_p
//     the exchange failed, the vote aborted or     retried at once, blocking, with the next quorum and the
//     was refused                                  Δ kept from step t (a heal meanwhile gives the healed
//                                                  member weight 0 and the donor's Δ); commit as above; the
//                                                  data round is laid out again from t + τ
//
// The config keeps τ < ⌊H/P'⌋ (the spacing of synchronisation points), so at most one exchange is in
// flight and none at a synchronisation point, where heals happen; the last step synchronises every
// fragment without overlap, so the final θ_g holds every member's work.
//
// Data (note "elastic-data", round_layout.h): a round is the inner steps between two synchronisations,
// w = the round's steps × this member's batch. Windows of a member lost mid-round are skipped, never
// trained twice in an epoch.
#pragma once

#include <future>
#include <memory>
#include <optional>

#include "loco/algo/outer_nesterov.h"
#include "loco/algo/pseudo_gradient_average.h"
#include "loco/algo/parameter_fragment.h"
#include "loco/comm/codecs/codec.h"
#include "loco/elastic/elastic_member.h"
#include "loco/elastic/round_layout.h"
#include "loco/elastic/sync_points.h"
#include "loco/train/strategy.h"
#include "loco/util/serial_worker.h"

namespace loco::elastic {

// The fragments of a model the outer step works on (whole_model, or block_fragments for Streaming).
using FragmentLayout = std::function<std::vector<ParameterFragment>(Llama& model, const FlatParameters& parameters)>;

// Note "elastic-overlap": τ inner steps between the start of an exchange and its outer step (0: the
// exchange blocks), and α, the weight of the member's own parameters when the outer step lands.
struct OuterOverlap {
  std::int64_t steps = 0;
  double mix = 0.5;
};

class ElasticDiloco final : public Strategy {
 public:
  // `name`: "diloco", "localsgd" or "streaming" (logs). `points` must expect as many fragments as `layout`
  // makes, and be spaced more than `overlap.steps` apart. `context.replica` must be set (the trainer's
  // state); `context.group` is unused: the groups are the quorums'. `windows_per_step`: the sequences this
  // member trains on per step; `vote_timeout_s`: the longest a vote waits for the others'.
  ElasticDiloco(std::string name, const DilocoConfig& config, const ExchangeConfig& exchange, SyncPoints points,
                FragmentLayout layout, OuterOverlap overlap, const ReplicaContext& context, QuorumGroup& groups,
                membership::MemberClient& member, std::uint64_t windows_per_step, double vote_timeout_s);

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void begin() override;
  void after_step(std::int64_t step) override;
  void with_evaluation_parameters(const std::function<void()>& evaluate) override;
  void add_log_fields(nlohmann::json& record) override;
  NamedTensors state_tensors() const override;
  nlohmann::json state_json() const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  // An outer step whose exchange started at a synchronisation point and has not been committed (note
  // "elastic-overlap").
  struct Pending {
    std::int64_t step = 0;  // t: the synchronisation point; its due fragments are the ones updated
    torch::Tensor delta;    // their Δ at t, concatenated: kept for a retry
    double weight = 1;      // this member's weight in the mean: 0 once it healed in this synchronisation
    // The exchange in flight (quorum empty once it failed or was given up):
    std::optional<membership::QuorumReply> quorum;
    comm::Group* group = nullptr;  // the quorum's, alive until the member abandons it (after this exchange)
    torch::Tensor mean;            // scratch the background exchange averages Δ into
    std::shared_ptr<PseudoGradientAverage> averaged;  // Σ weight and the rejected, set by the background exchange
    std::future<void> exchanged;
  };

  // Joins the quorum at this member's step and, unless the run is only starting, synchronises the fragments
  // due then with it (begun in the background with overlap), or retries the pending outer step.
  void synchronise();
  // Starts the pending outer step's exchange with `quorum` on the background thread.
  void exchange_in_background(comm::Group& group, const membership::QuorumReply& quorum);
  // After step t + τ: waits for the pending exchange and commits its outer step, or retries it (synchronise).
  void finish_overlapped();
  // The step after which the outer step of the exchange begun at `point` is due: t + τ, at most the last.
  std::int64_t outer_step_due(std::int64_t point) const { return std::min(point + overlap_.steps, context_.total_steps); }
  // Phase two of an outer step of the fragments due at `point`, with the exchange's mean Δ̄ (`contributed`:
  // Σ weight; 0 leaves θ_g as it was): votes as the synchronisation at step `vote_at` (where the quorum's
  // members met), and on commit applies it (mixing θ_m with `mix`). False when nothing was committed.
  bool decide(comm::Group& group, const membership::QuorumReply& quorum, std::int64_t point, std::int64_t vote_at,
              const torch::Tensor& mean, const PseudoGradientAverage& averaged, bool mix);
  // Replaces `delta` (the due fragments' Δ of the synchronisation at `point`) by the average over the group
  // (dist.aggregation), this member counting `weight`: Σ weight of the members in it (0: skip) and the ranks
  // whose Δ was rejected.
  PseudoGradientAverage average(comm::Group& group, torch::Tensor& delta, double weight, std::int64_t point) const;
  // Δ of the fragments due at `point`, from this member's parameters now, concatenated.
  torch::Tensor pseudo_gradients(std::int64_t point) const;
  bool overlaps(std::int64_t point) const { return overlap_.steps > 0 && point < context_.total_steps; }
  // Every fragment's (θ_g, b) as checkpoints name them, taken from `outer` (a candidate or the current).
  NamedTensors outer_state(const std::function<const OuterNesterov&(std::size_t)>& outer) const;
  NamedTensors current_outer_state() const;
  // After a commit whose votes disagreed: the outliers take θ_g and b from the first canonical member.
  void share_canonical_state(comm::Group& group, const membership::QuorumReply& quorum, const membership::CommitReply& decision);
  // Lays out the round that starts at `step` for `quorum` and points the data stream at this member's part
  // (`again`: the round laid out last, anew, as nothing of it was read).
  void start_round(const membership::QuorumReply& quorum, std::int64_t step, bool again = false);

  std::string name_;
  DilocoConfig config_;
  ExchangeConfig exchange_;
  SyncPoints points_;
  FragmentLayout layout_;
  OuterOverlap overlap_;
  ReplicaContext context_;
  ElasticMember member_;
  std::uint64_t windows_per_step_;
  std::unique_ptr<comm::Codec> codec_;
  std::vector<ParameterFragment> fragments_;
  std::vector<OuterNesterov> outer_;
  std::int64_t outer_steps_ = 0;
  std::int64_t last_point_ = 0;  // the last synchronisation point begun or committed
  bool begun_ = false;           // the first quorum was asked for
  RoundLayout rounds_;           // note "elastic-data"
  std::optional<Pending> pending_;
  // Last member, so destroyed first: an exchange in flight finishes (or fails) before what it writes goes.
  std::unique_ptr<SerialWorker> background_;
};

}  // namespace loco::elastic
