// NoLoCo (ALGORITHMS.md §5): no collective over all replicas. Every H inner steps each replica
// averages with the members of its group (pairing.h: a seeded random pair, or a three for odd M),
// point to point, and updates its slow weights φ with heavy-ball momentum, in the form of the
// authors' code:
//
//     m_i ← α·m_i + β·mean_G(θ − φ) + γ·(mean_G(φ) − φ_i)       G: this replica's group
//     φ_i ← φ_i + m_i ;   θ_i ← φ_i
//
// Each replica sends (θ_i − φ_i, φ_i) to every other member and receives theirs: 2·N values per
// partner (§9). Means are taken in rank order, so both members of a pair compute the same means.
// φ and m live on the host; the run's last step always syncs. The evaluation model is φ_i.
#pragma once

#include <optional>
#include <vector>

#include "loco/algo/link_timeline.h"
#include "loco/algo/parameter_fragment.h"
#include "loco/algo/sync_schedule.h"
#include "loco/comm/member_exchange.h"
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
  // Pairs are drawn from context.seed.
  Noloco(const NolocoConfig& config, SyncSchedule schedule, const ReplicaContext& context);

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void after_step(std::int64_t step) override;
  void with_evaluation_parameters(const std::function<void()>& evaluate) override;
  NamedTensors state_tensors() const override;
  nlohmann::json state_json() const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  void sync(std::int64_t step);

  NolocoConfig config_;
  SyncSchedule schedule_;
  ReplicaContext context_;
  LinkTimeline link_;
  std::optional<ParameterFragment> parameters_;
  torch::Tensor slow_;      // φ_i
  torch::Tensor momentum_;  // m_i
  std::int64_t outer_steps_ = 0;
};

}  // namespace loco
