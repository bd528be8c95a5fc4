// Elastic DiLoCo, Local SGD and Streaming DiLoCo without overlap (docs/fault-tolerance.md "Elastic
// DiLoCo"): the outer step of algo/diloco.h (ALGORITHMS.md §1, §6; per fragment for Streaming, §4 with
// τ = 0) over whichever members form the quorum at each synchronisation, committed in two phases, with
// members that are behind healed from a live one. One synchronisation, of the fragments F due at this
// step (sync_points.h: the whole model for DiLoCo and Local SGD, fragments in turn for Streaming):
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
//                                                 abandoned all-reduce may still write)
//     θ_g,p' , b_p' = Nesterov(θ_g,p, b_p, Δ̄_p)    on copies (OuterNesterov)
//     vote(ok, SHA-256 of every (θ_g', b'))        commit: θ_g,p ← θ_g,p', b_p ← b_p', θ_m,p ← θ_g,p; members
//                                                 whose hash differs take θ_g, b from the lowest-ranked
//                                                 canonical one
//                                                 abort, or a failed collective: nothing applied; retry
//                                                 coordinator replaced before deciding: presumed commit
//
// Data (note "elastic-data", round_layout.h): a round is the inner steps between two synchronisations,
// w = the round's steps × this member's batch. Windows of a member lost mid-round are skipped, never
// trained twice in an epoch.
#pragma once

#include <memory>
#include <optional>

#include "loco/algo/outer_nesterov.h"
#include "loco/algo/parameter_fragment.h"
#include "loco/comm/codecs/codec.h"
#include "loco/elastic/elastic_member.h"
#include "loco/elastic/round_layout.h"
#include "loco/elastic/sync_points.h"
#include "loco/train/strategy.h"

namespace loco::elastic {

// The fragments of a model the outer step works on (whole_model, or block_fragments for Streaming).
using FragmentLayout = std::function<std::vector<ParameterFragment>(Llama& model, const FlatParameters& parameters)>;

class ElasticDiloco final : public Strategy {
 public:
  // `name`: "diloco", "localsgd" or "streaming" (logs). `points` must expect as many fragments as `layout`
  // makes. `context.replica` must be set (the trainer's state); `context.group` is unused: the groups are
  // the quorums'. `windows_per_step`: the sequences this member trains on per step; `vote_timeout_s`: the
  // longest a vote waits for the others'.
  ElasticDiloco(std::string name, const DilocoConfig& config, const ExchangeConfig& exchange, SyncPoints points,
                FragmentLayout layout, const ReplicaContext& context, QuorumGroup& groups,
                membership::MemberClient& member, std::uint64_t windows_per_step, double vote_timeout_s);

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void after_step(std::int64_t step) override;
  void with_evaluation_parameters(const std::function<void()>& evaluate) override;
  void add_log_fields(nlohmann::json& record) override;
  NamedTensors state_tensors() const override;
  nlohmann::json state_json() const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  // Joins the quorum at this member's step and, unless the run is only starting, commits one outer step
  // of the fragments due then with it.
  void synchronise();
  // Every fragment's (θ_g, b) as checkpoints name them, taken from `outer` (a candidate or the current).
  NamedTensors outer_state(const std::function<const OuterNesterov&(std::size_t)>& outer) const;
  // After a commit whose votes disagreed: the outliers take θ_g and b from the first canonical member.
  void share_canonical_state(comm::Group& group, const membership::QuorumReply& quorum, const membership::CommitReply& decision);
  // Lays out the round that starts at `step` for `quorum` and points the data stream at this member's part.
  void start_round(const membership::QuorumReply& quorum, std::int64_t step);

  std::string name_;
  DilocoConfig config_;
  ExchangeConfig exchange_;
  SyncPoints points_;
  FragmentLayout layout_;
  ReplicaContext context_;
  ElasticMember member_;
  std::uint64_t windows_per_step_;
  std::unique_ptr<comm::Codec> codec_;
  std::vector<ParameterFragment> fragments_;
  std::vector<OuterNesterov> outer_;
  std::int64_t outer_steps_ = 0;
  RoundLayout rounds_;  // note "elastic-data"
};

}  // namespace loco::elastic
