// The process group of an elastic run's current quorum (docs/fault-tolerance.md). At each
// synchronisation point the member asks the coordinator for a quorum; when its id differs from the
// group's, a new c10d group is built on the coordinator's store under the quorum's own key prefix and
// the old one is buried (note "group-graveyard" in comm/group_graveyard.h). Waiting on a collective
// of the group gives up (PeerLost) as soon as the coordinator says the quorum broke (a member left, or
// stopped heartbeating), instead of waiting for the group's timeout (GroupOptions::abandoned).
// What concerns only some members of a quorum (a state sent from a donor to the members that heal) runs
// in a subgroup of them, so that the others neither receive it nor slow its sender down.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loco/comm/c10d/c10d_group.h"
#include "loco/comm/group.h"
#include "loco/comm/group_graveyard.h"
#include "loco/membership/member_client.h"

namespace loco::elastic {

struct QuorumGroupOptions {
  std::string backend = "gloo";
  comm::GroupOptions group;  // timeout: the longest a collective may take when nothing breaks
  comm::Timeout rendezvous_timeout{std::chrono::seconds(30)};
  double quorum_timeout_s = 120;  // the longest a member waits for a quorum
  std::string interface;          // Gloo's network interface; empty: the one that routes to the coordinator
};

class QuorumGroup {
 public:
  QuorumGroup(membership::MemberClient& member, QuorumGroupOptions options);
  ~QuorumGroup();
  QuorumGroup(const QuorumGroup&) = delete;
  QuorumGroup& operator=(const QuorumGroup&) = delete;

  // Waits for the quorum at the synchronisation point after `step` steps and returns its group: the
  // same one while the quorum is unchanged. MembershipError when the member was fenced out or no quorum
  // formed in time; CommError when the new group could not be built (the caller may ask again);
  // RunFinished when other members finished the run meanwhile (an Error when they finished it at a step this
  // member is already beyond: their train.steps differ).
  comm::Group& join_quorum(std::int64_t step);
  // The quorum of the current group (after a join_quorum).
  const membership::QuorumReply& quorum() const;

  // A group of some members of the current quorum: `ranks` (their ranks in the quorum's group, ascending,
  // this member's among them), built on the quorum's store under the prefix the quorum's own and `name`
  // make. Every member of `ranks` must ask with the same arguments, and `name` must not be used twice in a
  // quorum. It is abandoned with the quorum's group, or when the next subgroup is built.
  comm::Group& subgroup(const std::vector<int>& ranks, const std::string& name);

  // The group of this member's pipeline replica (membership/coordinator.h note "pipeline-units"): its
  // stages, ranked by stage, on the run's store under `pipeline.store_prefix`. Its collectives give up when
  // this member is fenced (its replica broke), not when a quorum breaks: the stages train on meanwhile.
  // `options`: the timeout and emulated link of the stages' messages.
  std::unique_ptr<comm::Group> pipeline_group(const membership::PipelineReply& pipeline, int stage,
                                              comm::GroupOptions options) const;

  // Abandons the current group (after a CommError): buried, and a new one is built at the next join.
  void abandon();

  // What this member's groups have counted so far, those of earlier quorums included (metrics.jsonl's
  // bytes_sent, bytes_recv and comm_s of an elastic member).
  comm::CommStats stats() const;

 private:
  // The c10d options of a group of `world_size` members under `store_prefix`, this member being `rank`.
  comm::C10dOptions group_options(int rank, int world_size, const std::string& store_prefix) const;
  // Buries `group`, keeping its counts.
  void retire(std::unique_ptr<comm::Group>& group);

  membership::MemberClient& member_;
  QuorumGroupOptions options_;
  std::optional<membership::QuorumReply> quorum_;
  std::unique_ptr<comm::Group> group_;
  std::unique_ptr<comm::Group> subgroup_;
  comm::CommStats retired_;  // of the groups buried so far
  comm::GroupGraveyard graveyard_;  // last member: waits for buried groups before the rest goes
};

}  // namespace loco::elastic
