// Elastic data parallel (docs/fault-tolerance.md "Elastic data parallel"): the gradient mean of
// algo/ddp.h (docs/algorithm-reference.md §8) over whichever members form the quorum at each step, committed in two
// phases like an outer step (as torchft asks for a quorum and votes on every step). After backward, at
// step S+1 (S steps done):
//
//   loop:
//     q   = the quorum of step S+1                  members report S+1; one that has only just started
//                                                   reports S, its steps done (it waits in begin())
//     heal: if a member is behind q's               the members' SHA-256 of their parameters θ are gathered;
//                                                   the lowest-ranked up-to-date member holding the most
//                                                   common one sends its whole replica state (θ, AdamW
//                                                   moments, step, data position) in checked chunks; the
//                                                   members behind check and adopt it; then all ask again
//                                                   (one that had just started computes its gradient meanwhile)
//     ḡ   = Σ w_m·g_m / Σ w_m over q                on a scratch copy in fp32; w_m = 0 when m's state was
//                                                   replaced after it computed g_m (g_m belongs to other θ)
//     vote(ok, SHA-256 of (θ, ḡ))                   commit: members whose hash differs first adopt the
//                                                   state of one that holds the common one; then g ← ḡ and
//                                                   the trainer clips and steps AdamW as usual
//                                                   abort, or a failed collective: g kept; retry with the
//                                                   next quorum
//
// Every member starts from the same θ and AdamW state and applies the same ḡ (Gloo's all-reduce gives
// every rank the same bytes), so members stay bit-identical; the vote checks it every step. Unlike
// algo/ddp.h there are no buckets and no overlap with backward: the gradient is exchanged in one piece
// once the quorum is known.
//
// Why a protocol of its own rather than algo/ddp.h over a membership (note "membership"): data parallel
// synchronises inside a step, between backward and the optimizer, and a heal there must give the member
// the donor's step and make the trainer's step start over with it; the DiLoCo family and NoLoCo
// synchronise between steps, where the membership's one attempt loop serves them. Static data parallel
// overlaps buckets with backward, which a quorum known only after backward cannot.
//
// Data (note "elastic-data", round_layout.h): a round is one step, w = this member's batch. The quorum that
// commits step S+1 lays out step S+2. A member that heals trains on its donor's windows for its first
// step, which therefore counts nothing.
#pragma once

#include <memory>

#include "loco/elastic/elastic_member.h"
#include "loco/elastic/quorum_membership.h"
#include "loco/elastic/round_layout.h"
#include "loco/train/strategy.h"

namespace loco::elastic {

class ElasticDdp final : public Strategy {
 public:
  // `context.replica` must be set (the trainer's state); the groups are `membership`'s quorums' (after
  // its attach). `windows_per_step`: the sequences this member trains on per step.
  ElasticDdp(const ReplicaContext& context, QuorumMembership& membership, std::uint64_t windows_per_step);

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void begin() override;
  void after_backward() override;
  void add_log_fields(nlohmann::json& record) override;
  nlohmann::json state_json() const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  // Every gradient buffer, in one fp32 host tensor (a copy).
  torch::Tensor gradients() const;
  void set_gradients(const torch::Tensor& flat);
  // SHA-256 of the parameters and `mean`: what members vote on.
  std::string candidate_hash(const torch::Tensor& mean) const;
  // Points the data stream at this member's windows of the next step (note "elastic-data").
  void start_round(const membership::QuorumReply& quorum);

  ReplicaContext context_;
  ElasticMember& member_;
  std::uint64_t windows_per_step_;
  NamedTensors named_parameters_;  // the model's parameters as a snapshot names them: what heals compare
  const FlatParameters* parameters_ = nullptr;
  bool replaced_ = false;  // this member's state was replaced since its gradient was computed: weight 0
  std::int64_t commits_ = 0;
  RoundLayout rounds_;  // note "elastic-data": a round is one step
};

}  // namespace loco::elastic
