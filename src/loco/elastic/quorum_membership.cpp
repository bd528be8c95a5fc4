#include "loco/elastic/quorum_membership.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "loco/algo/outer_state_io.h"
#include "loco/comm/comm_error.h"
#include "loco/elastic/state_digest.h"
#include "loco/membership/commit_rules.h"
#include "loco/train/replica_state.h"
#include "loco/util/error.h"

namespace loco::elastic {

QuorumMembership::QuorumMembership(QuorumGroup& groups, membership::MemberClient& client,
                                   std::uint64_t windows_per_step, double vote_timeout_s, int replica,
                                   std::string directory_member, comm::Group* replica_stages)
    : groups_(groups),
      client_(client),
      windows_per_step_(windows_per_step),
      vote_timeout_s_(vote_timeout_s),
      replica_number_(replica),
      pipeline_stage_(!directory_member.empty()),
      directory_member_(directory_member.empty() ? client.credentials().member_id : std::move(directory_member)),
      replica_stages_(replica_stages) {}

void QuorumMembership::attach(ReplicaState& replica) {
  replica_ = &replica;
  member_ = std::make_unique<ElasticMember>(replica, groups_, client_, vote_timeout_s_, replica_stages_);
}

ElasticMember& QuorumMembership::member() {
  LOCO_CHECK(member_ != nullptr, "QuorumMembership::member() before attach()");
  return *member_;
}

const membership::QuorumReply& QuorumMembership::quorum() const {
  LOCO_CHECK(quorum_.has_value(), "a quorum membership asked for its quorum before joining one");
  return *quorum_;
}

// The member id ("name#n") names the member's directory, with '#' spelled '-'; a pipeline stage's is its
// replica's first stage's (the trainer puts stage s > 0 in its stage_s subdirectory).
std::filesystem::path QuorumMembership::directory(const std::filesystem::path& out_dir) const {
  std::string name = directory_member_;
  std::replace(name.begin(), name.end(), '#', '-');
  return out_dir / "members" / name;
}

// Its id now: a member that rejoined is named by its new one (before: the first, in a give-up after a rejoin).
std::string QuorumMembership::describe() const {
  return fmt::format("elastic member {}", client_.credentials().member_id);
}

void QuorumMembership::begin(const Synchronisation& sync) { synchronise(replica_->step(), sync); }

void QuorumMembership::synchronise(std::int64_t, const Synchronisation& sync) {
  bool adopted = false;  // this member adopted another's state during this synchronisation: it counts 0
  member().synchronise(
      [this] { return replica_->step(); },  // after a heal: the donor's
      [&](comm::Group& group, const membership::QuorumReply& quorum) {
        quorum_ = quorum;
        std::vector<int> receivers;
        if (quorum.step > 0) {  // at 0 the run starts: nobody is behind
          const auto alike = sync.alike ? membership::ReplicasAlike::yes : membership::ReplicasAlike::no;
          // Note "sync-progress" (heal_rules.h): members resumed at one step may stand on either side of its
          // synchronisation; the one whose synchronisation is still to do adopts the state of one that did it.
          torch::Tensor points = torch::empty({group.size()}, torch::kInt64);
          group.all_gather(torch::full({1}, last_point_, torch::kInt64), points);
          const std::vector<std::int64_t> each(points.data_ptr<std::int64_t>(),
                                               points.data_ptr<std::int64_t>() + group.size());
          const HealOutcome healed =
              member_->heal(group, sync.compared(), SnapshotSection::strategy, alike, /*check_alike=*/false, each);
          adopted = adopted || healed.this_member;
          receivers = healed.receivers;
        }
        return sync.attempt(Participants{&group, replica_->step(), receivers, adopted});
      });
}

bool QuorumMembership::commit(const Participants& who, const std::function<NamedTensors()>& candidate,
                              const std::vector<int>& rejected,
                              const std::function<void(comm::Group&, int root)>& share) {
  if (candidate) {
    const membership::QuorumReply& q = quorum();
    std::vector<std::string> names;  // reported: the coordinator removes a member rejected repeatedly
    for (const int rank : rejected) names.push_back(q.members.at(static_cast<std::size_t>(rank)));
    const std::optional<membership::CommitReply> decision =
        member_->vote(q.quorum_id, who.step, state_digest(candidate()), names);
    if (!decision) return false;  // refused: nothing committed
    if (decision->outcome != membership::Outcome::commit) {
      member_->aborted(who.step, decision->reason);
      return false;
    }
    if (const std::string contradiction = membership::impossible_outliers(decision->outliers, q.members);
        !contradiction.empty()) {
      member_->aborted(who.step, "the coordinator's decision contradicts itself: " + contradiction);
      return false;
    }
    if (!decision->outliers.empty()) {
      int canonical = 0;  // the lowest-ranked member whose vote held the common hash (one is: checked above)
      while (std::binary_search(decision->outliers.begin(), decision->outliers.end(),
                                q.members.at(static_cast<std::size_t>(canonical)))) {
        ++canonical;
      }
      share(*who.group, canonical);
    }
  }
  ++synchronisations_;
  return true;
}

void QuorumMembership::failed(const Participants& who, const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const comm::CommError& e) {
    member_->give_up(quorum_, who.step, e.what());
  }
}

void QuorumMembership::skipped(const Participants& who, const std::vector<int>& with, const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const comm::CommError& e) {
    std::vector<std::string> names;
    for (const int rank : with) names.push_back(quorum().members.at(static_cast<std::size_t>(rank)));
    member_->skip(quorum_, who.step, fmt::format("{}", fmt::join(names, ", ")), e.what());
  }
}

void QuorumMembership::round_begins(const Participants& who, std::int64_t point, std::int64_t steps, RoundStart start) {
  const auto windows = static_cast<std::uint64_t>(std::max<std::int64_t>(0, steps)) * windows_per_step_;
  const std::size_t members = quorum().members.size();
  const int rank = quorum().rank;
  if (start == RoundStart::resumed && continues_round(who)) {
    // Each member's data position is the one its checkpoint restored, inside its part of the round.
  } else if (start == RoundStart::again) {
    replica_->seek_data(rounds_.restart(members, rank, windows));
  } else {
    replica_->seek_data(rounds_.start(members, rank, windows));
  }
  last_point_ = std::max(last_point_, point);
}

bool QuorumMembership::continues_round(const Participants& who) {
  // A pipeline stage decides in its stage's quorum, apart from its replica's other stages, which must read the
  // same windows: pipeline replicas skip the rest of the round, as before.
  if (pipeline_stage_) return false;
  const bool mine =
      !who.adopted_state && rounds_.holds_inside(quorum().members.size(), quorum().rank, replica_->data_window());
  // The layout and the answer alike on every member, or none goes on.
  const std::string said = fmt::format("{} {}", rounds_.describe(), mine);
  return who.group->ranks_differing_from_rank_0(std::string_view(said)).empty() && mine;
}

void QuorumMembership::before_exchange() { member().before_exchange(); }

void QuorumMembership::add_log_fields(nlohmann::json& record) {
  record["outer_steps"] = synchronisations_;
  member().log().add_fields_to(record);
}

// The membership's state travels with the strategy's: a member that heals continues its donor's rounds.
void QuorumMembership::save_to(nlohmann::json& json) const {
  json["last_point"] = last_point_;
  json["synchronisations"] = synchronisations_;
  rounds_.save_to(json);
}

void QuorumMembership::load_from(const nlohmann::json& json, const SafetensorsContent& tensors) {
  last_point_ = saved_outer_integer(json, "last_point", tensors);
  synchronisations_ = saved_outer_integer(json, "synchronisations", tensors);
  rounds_.load_from(json, tensors);
}

}  // namespace loco::elastic
