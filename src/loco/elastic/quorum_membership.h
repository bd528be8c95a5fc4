// The membership of an elastic run (note "membership", train/membership.h; docs/fault-tolerance.md "Elastic
// DiLoCo"): whichever members form the coordinator's quorum at each synchronisation. One synchronisation:
//
//   loop:
//     q    = the quorum at this member's step             QuorumGroup::join_quorum (a new group when q is new)
//     heal: if a member's step is behind q's (or, where   the members' SHA-256 of the compared state are
//           members are alike, holds another state)       gathered; the lowest-ranked up-to-date member
//                                                         holding the most common one sends its whole replica
//                                                         state in checked chunks (note "elastic-heal"); the
//                                                         members behind or unlike it check and adopt it, and
//                                                         their contribution counts 0 this time
//     the strategy's attempt with q                       its exchange, then for an outer step:
//     vote(ok, SHA-256 of the candidate state)            commit: the members whose hash differs take the
//                                                         state of the lowest-ranked canonical one; abort,
//                                                         a refused vote, or a failed collective: nothing
//                                                         applied, retried with the next quorum;
//                                                         coordinator replaced before deciding: presumed commit
//
// Data (note "elastic-data", round_layout.h): a round is the inner steps between two synchronisations; the
// quorum that completes one lays out the next, and this member's data stream points at its part.
//
// Note "elastic-overlap" (Streaming DiLoCo with τ > 0): at a synchronisation point t the quorum, the heal
// and Δ are as above, but the exchange runs in the background while τ more inner steps run, and the vote
// comes after step t + τ. When the exchange failed, or the vote aborted or was refused, the outer step is
// retried at once, blocking, with the next quorum and the Δ kept from step t (a member that heals meanwhile
// takes its donor's kept Δ, which counts 0); the data round is laid out again from there. The config keeps
// τ below the spacing of synchronisation points, so at most one exchange is in flight and none at a
// synchronisation point, where heals happen.
//
// Note "elastic-resume": members that resume a run from their checkpoints join their first quorum in
// begin(). A checkpoint keeps an exchange that was not committed as the member's own Δ, exchanged again
// with the first quorum (in the background when its outer step is still ahead); members that resumed at a
// step whose synchronisation is done (or at no synchronisation point) only lay the round out again.
//
// Note "resume-inside-round" (audit round 14): an elastic member stops alone, after any step, so its checkpoint
// is mostly of a step inside a round. Members that all resumed inside the same round go on reading it where each
// stopped, when the quorum is the round's (as many members, each at its own place in the round's layout, none
// healed), and the run goes on as the uninterrupted one did. Otherwise the rest of the round is skipped and a new
// one laid out (before: always, so a stop and a resume was another run), and always for pipeline stages, whose
// replica's stages decide in separate quorums. All members decide alike: a layout that differed between them
// would overlap later rounds.
#pragma once

#include <memory>
#include <optional>

#include "loco/elastic/elastic_member.h"
#include "loco/elastic/round_layout.h"
#include "loco/train/membership.h"

namespace loco::elastic {

class QuorumMembership final : public Membership {
 public:
  // `windows_per_step`: the sequences this member trains on per step; `vote_timeout_s`: the longest a vote
  // waits for the others'; `replica`: the replica this member plays in the run's numbering (-1: none);
  // `directory_member`: the member whose id names the directory (a pipeline stage's: its replica's first
  // stage, so that the stages write one replica directory); empty: this member's own. `replica_stages`: a
  // pipeline stage's group with its replica's other stages, which settle every attempt alike (note
  // "stage-agreement" in stage_agreement.h); null: a whole replica, or a strategy without votes (NoLoCo).
  QuorumMembership(QuorumGroup& groups, membership::MemberClient& client, std::uint64_t windows_per_step,
                   double vote_timeout_s, int replica, std::string directory_member = "",
                   comm::Group* replica_stages = nullptr);

  void attach(ReplicaState& replica) override;
  std::filesystem::path directory(const std::filesystem::path& out_dir) const override;
  DataSlice data_slice() const override { return {0, 1}; }  // one global order, laid out by round_begins

  std::string describe() const override;
  int replica() const override { return replica_number_; }
  bool may_abort() const override { return true; }
  void begin(const Synchronisation& sync) override;
  void synchronise(std::int64_t step, const Synchronisation& sync) override;
  bool commit(const Participants& who, const std::function<NamedTensors()>& candidate, const std::vector<int>& rejected,
              const std::function<void(comm::Group&, int root)>& share) override;
  void failed(const Participants& who, const std::exception_ptr& error) override;
  void skipped(const Participants& who, const std::vector<int>& with, const std::exception_ptr& error) override;
  void round_begins(const Participants& who, std::int64_t point, std::int64_t steps, RoundStart start) override;
  std::int64_t last_point() const override { return last_point_; }
  void before_exchange() override;
  void add_log_fields(nlohmann::json& record) override;
  void save_to(nlohmann::json& json) const override;
  void load_from(const nlohmann::json& json, const SafetensorsContent& tensors) override;

  // The member runtime, for elastic data parallel's own protocol (elastic_ddp.h). After attach.
  ElasticMember& member();

 private:
  const membership::QuorumReply& quorum() const;
  // Note "resume-inside-round": whether every member of `who` goes on in the round laid out last (a collective).
  bool continues_round(const Participants& who);

  QuorumGroup& groups_;
  membership::MemberClient& client_;
  std::uint64_t windows_per_step_;
  double vote_timeout_s_;
  int replica_number_;
  bool pipeline_stage_;           // given its replica's first stage to name its directory
  std::string directory_member_;  // names the member's directory
  comm::Group* replica_stages_;
  ReplicaState* replica_ = nullptr;
  std::unique_ptr<ElasticMember> member_;
  std::optional<membership::QuorumReply> quorum_;  // of the last attempt
  RoundLayout rounds_;
  std::int64_t last_point_ = 0;
  std::int64_t synchronisations_ = 0;  // completed with others: "outer_steps" in the metrics
};

}  // namespace loco::elastic
