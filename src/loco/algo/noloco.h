// NoLoCo (docs/algorithm-reference.md §5): no collective over all replicas. Every H inner steps each
// replica averages with the members of its group (pairing.h: a seeded random pair, or a three for an odd
// number), point to point, and updates its slow weights φ with heavy-ball momentum, in the form of the
// authors' code:
//
//     m_i ← α·m_i + β·mean_G(θ − φ) + γ·(mean_G(φ) − φ_i)       G: this replica's group
//     φ_i ← φ_i + m_i ;   θ_i ← φ_i
//
// Each replica sends (θ_i − φ_i, φ_i) to every other member and receives theirs: 2·N values per partner
// (§9). Means are taken in rank order, so both members of a pair compute the same means. φ and m live on
// the host; the run's last step always syncs. The evaluation model is φ_i.
//
// For static and elastic runs alike (note "membership"): the groups are drawn among the participants of
// each synchronisation that did not just heal, seeded by (train.seed, the number of synchronisation points
// before it), so every participant draws the same ones. NoLoCo's replicas differ by design: there is no
// vote, and a member that heals takes an up-to-date member's whole state and sits the round out. Where the
// membership lets a member fail, an exchange that fails is skipped: nothing is applied, and the member is
// paired again at the next synchronisation.
#pragma once

#include <optional>
#include <vector>

#include "loco/algo/link_timeline.h"
#include "loco/algo/parameter_fragment.h"
#include "loco/algo/sync_points.h"
#include "loco/comm/member_exchange.h"
#include "loco/train/membership.h"
#include "loco/train/strategy.h"

namespace loco {

// The mean over `members` (ranks of `group`, ascending, holding this rank) of each member's `mine`:
// sent to and received from every other member, point to point (comm/member_exchange.h, whose GroupWide
// says whether the exchange may teach the group its link), and summed in rank order so that every
// member computes the same bytes.
torch::Tensor group_mean(comm::Group& group, const torch::Tensor& mine, const std::vector<int>& members,
                         comm::GroupWide group_wide);

// The update above from `mean` = mean_G of (θ − φ, φ) concatenated: `momentum` and `slow` in place.
void noloco_outer_step(const NolocoConfig& config, const torch::Tensor& mean, torch::Tensor& slow,
                       torch::Tensor& momentum);

class Noloco final : public Strategy {
 public:
  // `context.membership` must be set.
  Noloco(const NolocoConfig& config, const ReplicaContext& context);

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void begin() override;
  void after_step(std::int64_t step) override;
  bool synchronised_at(std::int64_t step) const override { return membership_.last_point() == step; }
  void with_evaluation_parameters(const std::function<void()>& evaluate) override;
  void add_log_fields(nlohmann::json& record) override;
  NamedTensors state_tensors() const override;
  nlohmann::json state_json() const override;
  nlohmann::json schedule_of(const nlohmann::json& saved) const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  Membership::Synchronisation synchronisation();
  // One synchronisation: averages with this replica's group unless it just healed or has averaged there.
  bool attempt(const Participants& who);
  // Averages with this replica's group of the participants that did not heal.
  void average(const Participants& who);

  NolocoConfig config_;
  SyncPoints points_;
  ReplicaContext context_;
  Membership& membership_;
  LinkTimeline link_;
  std::optional<ParameterFragment> parameters_;
  torch::Tensor slow_;            // φ_i
  torch::Tensor momentum_;        // m_i
  std::int64_t outer_steps_ = 0;  // synchronisations this replica averaged in
};

}  // namespace loco
