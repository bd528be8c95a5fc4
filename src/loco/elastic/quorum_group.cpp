#include "loco/elastic/quorum_group.h"

#include <fmt/format.h>

#include <algorithm>

#include "loco/comm/c10d/c10d_group.h"
#include "loco/comm/comm_error.h"

namespace loco::elastic {

QuorumGroup::QuorumGroup(membership::MemberClient& member, QuorumGroupOptions options)
    : member_(member), options_(std::move(options)) {
  if (member_.store_port() == 0) {
    throw ConfigError(fmt::format("the coordinator at {}:{} serves no store; start it with --store-port (an elastic "
                                  "run's groups meet on the coordinator's store)",
                                  member_.coordinator().host, member_.coordinator().port));
  }
}

QuorumGroup::~QuorumGroup() { abandon(); }

comm::Group& QuorumGroup::join_quorum(std::int64_t step) {
  membership::QuorumReply next = member_.await_quorum(step, options_.quorum_timeout_s);
  if (next.run_finished && next.step < step) {
    // Note "finish-claims" (coordinator.cpp): the others stopped short of where this member already is.
    throw Error(
        fmt::format("other members finished the run at step {}, but this member is already at step {}: the "
                    "members were not given the same train.steps. Start every member with the same config "
                    "(this one stops here; resume it from its latest checkpoint)",
                    next.step, step));
  }
  if (next.run_finished) {
    throw membership::RunFinished(fmt::format("the run was finished at step {} by other members while this one was "
                                              "at step {}; its final state is in their directories",
                                              next.step, step));
  }
  if (group_ && quorum_ && quorum_->store_prefix == next.store_prefix) {  // same incarnation and id
    quorum_ = std::move(next);
    return *group_;
  }
  abandon();
  group_ = comm::make_c10d_group(group_options(next.rank, static_cast<int>(next.members.size()), next.store_prefix));
  quorum_ = std::move(next);
  return *group_;
}

comm::Group& QuorumGroup::subgroup(const std::vector<int>& ranks, const std::string& name) {
  const membership::QuorumReply& current = quorum();
  const auto mine = std::find(ranks.begin(), ranks.end(), current.rank);
  LOCO_CHECK(mine != ranks.end() && std::is_sorted(ranks.begin(), ranks.end()),
             "QuorumGroup::subgroup of ranks that do not hold this member's {} or are not ascending", current.rank);
  retire(subgroup_);
  subgroup_ = comm::make_c10d_group(group_options(static_cast<int>(mine - ranks.begin()), static_cast<int>(ranks.size()),
                                                  current.store_prefix + "/" + name));
  return *subgroup_;
}

std::unique_ptr<comm::Group> QuorumGroup::pipeline_group(const membership::PipelineReply& pipeline, int stage,
                                                         comm::GroupOptions options) const {
  comm::C10dOptions c10d = group_options(stage, static_cast<int>(pipeline.members.size()), pipeline.store_prefix);
  c10d.group = std::move(options);
  c10d.group.abandoned = [&member = member_] { return member.fenced().has_value(); };
  return comm::make_c10d_group(c10d);
}

comm::C10dOptions QuorumGroup::group_options(int rank, int world_size, const std::string& store_prefix) const {
  comm::C10dOptions c10d;
  c10d.backend = options_.backend;
  c10d.rank = rank;
  c10d.world_size = world_size;
  c10d.master_addr = member_.coordinator().host;
  c10d.master_port = member_.store_port();
  c10d.rank0_serves_store = false;
  c10d.store_prefix = store_prefix;
  c10d.interface = options_.interface;
  c10d.rendezvous_timeout = options_.rendezvous_timeout;
  c10d.group = options_.group;
  c10d.group.abandoned = [&member = member_] { return member.quorum_broken(); };
  return c10d;
}

const membership::QuorumReply& QuorumGroup::quorum() const {
  LOCO_CHECK(quorum_.has_value(), "QuorumGroup::quorum() before join_quorum()");
  return *quorum_;
}

void QuorumGroup::abandon() {
  retire(subgroup_);
  retire(group_);
  quorum_.reset();
}

void QuorumGroup::retire(std::unique_ptr<comm::Group>& group) {
  if (group) retired_ += group->stats();
  graveyard_.bury(std::move(group));
}

comm::CommStats QuorumGroup::stats() const {
  comm::CommStats total = retired_;
  if (group_) total += group_->stats();
  if (subgroup_) total += subgroup_->stats();
  return total;
}

}  // namespace loco::elastic
