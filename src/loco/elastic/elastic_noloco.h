// Elastic NoLoCo (docs/fault-tolerance.md "Elastic NoLoCo"): the group averaging of algo/noloco.h
// (ALGORITHMS.md §5, the form of the authors' code) among whichever members form the quorum at each
// synchronisation. NoLoCo's replicas differ by design and no state has to be the same everywhere, so
// there is no vote: each group's members average with each other or, when that fails, skip it. At the
// synchronisation after step t:
//
//   q   = the quorum at step t
//   heal: if a member is behind q's          it adopts the whole replica state of the lowest-ranked
//                                            up-to-date member, checked against that member's SHA-256 of
//                                            (φ, m); up-to-date members keep their own (heal_rules.h,
//                                            ReplicasAlike::no); a healed member skips this round
//   A   = the members of q that did not heal, in rank order
//   G   = this member's group of replica_groups(seed, t, |A|) over A (pairing.h: seeded pairs, or a
//         three for odd |A|)
//   exchange (θ − φ, φ) with the other members of G, point to point
//   m_i ← α·m_i + β·mean_G(θ − φ) + γ·(mean_G(φ) − φ_i);   φ_i ← φ_i + m_i;   θ_i ← φ_i
//   a failed exchange (a member of G died or stopped): this member keeps θ, φ and m, skips the round, and
//   is paired again from the next quorum; its partner, if its own exchange had completed, applies it
//
// Data (note "elastic-data", round_layout.h): as elastic DiLoCo, a round is the steps between two
// synchronisations.
#pragma once

#include <optional>

#include "loco/algo/parameter_fragment.h"
#include "loco/elastic/elastic_member.h"
#include "loco/elastic/round_layout.h"
#include "loco/elastic/sync_points.h"
#include "loco/train/strategy.h"

namespace loco::elastic {

class ElasticNoloco final : public Strategy {
 public:
  // Groups are drawn from `context.seed`; `context.replica` must be set.
  ElasticNoloco(const NolocoConfig& config, SyncSchedule schedule, const ReplicaContext& context, QuorumGroup& groups,
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
  // Joins the quorum at this member's step; heals if behind, else averages with its group.
  void synchronise();
  // Averages with this member's group of the members that did not heal (`healed`: ranks); when the
  // exchange fails, nothing is applied (the round is skipped).
  void average(comm::Group& group, const membership::QuorumReply& quorum, const std::vector<int>& healed,
               std::int64_t step);

  NolocoConfig config_;
  SyncPoints points_;
  ReplicaContext context_;
  ElasticMember member_;
  std::uint64_t windows_per_step_;
  std::optional<ParameterFragment> parameters_;
  torch::Tensor slow_;      // φ_i
  torch::Tensor momentum_;  // m_i
  std::int64_t outer_steps_ = 0;  // rounds this member averaged in
  std::int64_t last_point_ = 0;   // the last synchronisation point done (averaged, skipped or healed at)
  RoundLayout rounds_;
};

}  // namespace loco::elastic
