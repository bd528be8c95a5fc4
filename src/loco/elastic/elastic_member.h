// The member runtime of an elastic run (docs/fault-tolerance.md "Elastic DiLoCo", "Elastic data
// parallel"): join the quorum, heal the members that are behind or unlike the canonical state, vote in two
// phases, and give a synchronisation up cleanly when a collective fails. QuorumMembership
// (quorum_membership.h) serves the strategies of algo/ with it; ElasticDdp (a gradient mean every step)
// runs its own protocol on it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loco/elastic/membership_log.h"
#include "loco/elastic/quorum_group.h"
#include "loco/elastic/stage_agreement.h"
#include "loco/io/safetensors.h"
#include "loco/membership/heal_rules.h"
#include "loco/membership/retry_rules.h"
#include "loco/train/fault_injection.h"
#include "loco/train/strategy.h"
#include "loco/util/seconds_since.h"

namespace loco::elastic {

// Where the compared tensors sit in a replica snapshot (train/replica_state.h): the model's parameters
// (data parallel) or the strategy's outer state (DiLoCo).
enum class SnapshotSection { model, strategy };

struct HealOutcome {
  std::vector<int> receivers;  // the ranks that adopted another's state, ascending
  bool this_member = false;    // this member did
  bool anyone() const { return !receivers.empty(); }
};

class ElasticMember {
 public:
  // `replica`: the trainer's state, which heals replace; `vote_timeout_s`: the longest a vote waits for the
  // others'; `replica_stages`: the pipeline group of this stage's replica, whose stages end every attempt at a
  // synchronisation alike (note "stage-agreement"), or null (a whole replica; NoLoCo).
  ElasticMember(ReplicaState& replica, QuorumGroup& groups, membership::MemberClient& member, double vote_timeout_s,
                comm::Group* replica_stages = nullptr);

  // One synchronisation, tried with one quorum after another until it is done: `attempt` gets the group
  // and the quorum of the synchronisation this member reports as `reported()` (asked anew each time: a
  // heal moves the member's step) and returns true when done, false to ask for the next quorum (a refused
  // vote, an abort). A CommError gives the attempt up (give_up) and asks again. A new quorum is logged
  // (and a rejoin, when the member id changed). A pipeline stage settles each attempt with its replica's
  // other stages (note "stage-agreement"): in its vote, or as the attempt ends. Retries are paced, and end
  // with an Error once they have failed for longer than `vote_timeout_s` (membership/retry_rules.h).
  void synchronise(const std::function<std::int64_t()>& reported,
                   const std::function<bool(comm::Group&, const membership::QuorumReply&)>& attempt);
  // The coordinator decided to abort the synchronisation at `step` (`reason`): logged; nothing applied.
  void aborted(std::int64_t step, const std::string& reason);

  // When a member of the quorum reported a step behind the others' (or always, with `check_alike`): every
  // member's SHA-256 of `compared` (its tensors now, named as in `section` of a snapshot) is gathered; the
  // members behind (and, when replicas are `alike`, those unlike the canonical state) adopt the donor's
  // whole replica state after checking it (membership/heal_rules.h, note "elastic-heal"), sent to them
  // alone (QuorumGroup::subgroup): the other members return at once. CommError when the transfer or the
  // check fails. `points`: every member's last synchronisation point, in rank order, where members at one step
  // may differ in it (note "sync-progress", heal_rules.h); empty: only steps are compared.
  HealOutcome heal(comm::Group& group, const NamedTensors& compared, SnapshotSection section,
                   membership::ReplicasAlike alike = membership::ReplicasAlike::yes, bool check_alike = false,
                   const std::vector<std::int64_t>& points = {});

  // Phase one and two for this member's candidate `hash`: the decision, or nullopt when the vote was
  // refused and nothing was committed (the group is abandoned: retry with the next quorum). A pipeline
  // stage's commit turns into an abort when another stage of its replica retries (note "stage-agreement").
  // `rejected`: members whose pseudo-gradients this one left out (NaN or Inf), reported with the vote.
  std::optional<membership::CommitReply> vote(std::int64_t quorum_id, std::int64_t step, const std::string& hash,
                                              const std::vector<std::string>& rejected = {});
  // A vote against the synchronisation at `step` is sent for `quorum` (if any), so that the coordinator
  // aborts it and the others learn at once, and its next quorum takes a new id (a refusal only means the run
  // moved on); the group is abandoned.
  void report_failure(const std::optional<membership::QuorumReply>& quorum, std::int64_t step);

  // A synchronisation at `step` failed (`why`: a collective of `quorum` failed outside `synchronise`, as an
  // overlapped exchange does) and will be retried with the next quorum: logged, then reported
  // (report_failure); outside `synchronise`, a pipeline stage tells its replica's others.
  void give_up(const std::optional<membership::QuorumReply>& quorum, std::int64_t step, const std::string& why);
  // An exchange with the members `partners` of `quorum` at `step` failed (`why`) and has no second phase
  // (NoLoCo's group mean): the round is skipped, logged and reported (report_failure).
  void skip(const std::optional<membership::QuorumReply>& quorum, std::int64_t step, const std::string& partners,
            const std::string& why);

  // LOCO_FAULT=exchanging:... fires here (tests, chaos runs).
  void before_exchange();
  MembershipLog& log() { return log_; }
  std::string member_id() const { return member_.credentials().member_id; }

 private:
  void note_quorum(const membership::QuorumReply& quorum, double waited_s);
  // vote's decision for this member alone, before its replica's stages agree.
  std::optional<membership::CommitReply> decision_for(std::int64_t quorum_id, std::int64_t step,
                                                      const std::string& hash,
                                                      const std::vector<std::string>& rejected);
  // A vote that committed nothing (`why`: "vote refused", "no decision"): said, logged, and the group abandoned
  // for the next quorum's attempt.
  std::nullopt_t retry_uncommitted(std::int64_t step, const std::string& why, const std::string& detail);

  ReplicaState& replica_;
  QuorumGroup& groups_;
  membership::MemberClient& member_;
  double vote_timeout_s_;
  std::unique_ptr<FaultInjection> fault_;  // LOCO_FAULT=exchanging:..., donating:... or receiving:...
  std::unique_ptr<StageAgreement> stages_;  // a pipeline stage's, with its replica's other stages
  std::string last_quorum_;                // its store prefix (incarnation and id), for the log
  std::optional<membership::Credentials> credentials_;  // this member's, as of the last quorum
  MembershipLog log_;
  std::string transfers_quorum_;  // the quorum (store prefix) whose state transfers transfers_ counts
  int transfers_ = 0;
  SteadyClock::time_point started_;  // of the current synchronisation, for the log
  std::string last_failure_;         // why the current attempt failed, when it did (note "retry-pacing")
};

}  // namespace loco::elastic
