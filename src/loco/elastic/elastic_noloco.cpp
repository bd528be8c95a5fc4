#include "loco/elastic/elastic_noloco.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "loco/algo/noloco.h"
#include "loco/algo/outer_state_io.h"
#include "loco/algo/pairing.h"
#include "loco/comm/comm_error.h"
#include "loco/train/replica_state.h"
#include "loco/util/seconds_since.h"

namespace loco::elastic {

ElasticNoloco::ElasticNoloco(const NolocoConfig& config, SyncSchedule schedule, const ReplicaContext& context,
                             QuorumGroup& groups, membership::MemberClient& member, std::uint64_t windows_per_step,
                             double vote_timeout_s)
    : config_(config),
      points_(schedule),
      context_(context),
      member_(context, groups, member, vote_timeout_s, membership::ReplicasAlike::no),
      windows_per_step_(windows_per_step) {}

std::string ElasticNoloco::describe() const {
  return fmt::format("noloco (elastic): heavy-ball(authors' code form) alpha={} beta={} gamma={} {} groups drawn "
                     "from each quorum (seeded), member {}",
                     config_.momentum, config_.beta, config_.gamma, points_.describe(), member_.member_id());
}

void ElasticNoloco::attach(Llama&, const FlatParameters& parameters) {
  parameters_.emplace(whole_model(parameters));
  slow_ = parameters_->read();
  momentum_ = torch::zeros_like(slow_);
}

// The first quorum: the run starts, this member joins a run in progress and heals at the others' next
// synchronisation, or the members resume a run from checkpoints (note "elastic-resume").
void ElasticNoloco::begin() { synchronise(); }

void ElasticNoloco::after_step(std::int64_t step) {
  if (!points_.due(step).empty()) synchronise();
}

void ElasticNoloco::synchronise() {
  member_.synchronise([this] { return context_.replica->step(); },  // after a heal: the donor's
                      [this](comm::Group& group, const membership::QuorumReply& quorum) {
    bool resumed = false;  // note "elastic-resume": members resumed from checkpoints, nothing to average
    if (quorum.step > 0) {  // at 0 the run starts: nothing to average yet
      const HealOutcome healed = member_.heal(group, state_tensors(), SnapshotSection::strategy);
      const std::int64_t step = context_.replica->step();
      resumed = last_point_ >= step || points_.due(step).empty();
      if (!healed.this_member && !resumed) average(group, quorum, healed.receivers, step);
    }
    const std::int64_t at = context_.replica->step();
    if (at > 0) points_.synced(at);
    const std::int64_t until = std::min(points_.next_after(at), context_.total_steps);
    const auto windows = static_cast<std::uint64_t>(std::max<std::int64_t>(0, until - at)) * windows_per_step_;
    const std::size_t members = quorum.members.size();
    // A resume at a synchronisation lays its round out again (nothing of it was read); at any other step the
    // rest of the round is skipped.
    context_.replica->seek_data(resumed && at == last_point_ ? rounds_.restart(members, quorum.rank, windows)
                                                             : rounds_.start(members, quorum.rank, windows));
    last_point_ = std::max(last_point_, at);
    return true;
  });
}

void ElasticNoloco::average(comm::Group& group, const membership::QuorumReply& quorum, const std::vector<int>& healed,
                            std::int64_t step) {
  std::vector<int> averaging;  // ranks of the members that did not heal
  for (int r = 0; r < static_cast<int>(quorum.members.size()); ++r) {
    if (!std::binary_search(healed.begin(), healed.end(), r)) averaging.push_back(r);
  }
  const auto position = std::find(averaging.begin(), averaging.end(), group.rank()) - averaging.begin();
  std::vector<int> members;
  for (const int k : group_of(replica_groups(context_.seed, step, static_cast<int>(averaging.size())),
                              static_cast<int>(position))) {
    members.push_back(averaging[static_cast<std::size_t>(k)]);
  }
  if (members.size() < 2) return;  // alone in the quorum: nobody to average with
  const auto started = SteadyClock::now();
  try {
    member_.before_exchange();
    const torch::Tensor mine = torch::cat({parameters_->read().sub_(slow_), slow_});
    // Healed members sit this out, so no exchange is group-wide.
    const torch::Tensor mean = group_mean(group, mine, members, comm::GroupWide::no);
    noloco_outer_step(config_, mean, slow_, momentum_);
    parameters_->write(slow_);
    ++outer_steps_;
  } catch (const comm::CommError& e) {
    std::vector<std::string> names;
    for (const int r : members) names.push_back(quorum.members[static_cast<std::size_t>(r)]);
    fmt::print(stderr, "elastic: averaging with {} at step {} failed ({}); skipped, paired again at the next "
                       "synchronisation\n", fmt::join(names, ", "), step, e.what());
    member_.log().add("skip", step, seconds_since(started), e.what());
    member_.report_failure(quorum, step);
  }
}

void ElasticNoloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  with_values(*parameters_, slow_, evaluate);
}

void ElasticNoloco::add_log_fields(nlohmann::json& record) {
  record["outer_steps"] = outer_steps_;
  member_.log().add_fields_to(record);
}

NamedTensors ElasticNoloco::state_tensors() const {
  return {{"outer/slow", slow_}, {"outer/momentum", momentum_}};
}

nlohmann::json ElasticNoloco::state_json() const {
  nlohmann::json json = {{"outer_steps", outer_steps_}, {"next_sync", points_.saved_next()}, {"last_point", last_point_}};
  rounds_.save_to(json);
  return json;
}

void ElasticNoloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  slow_.copy_(saved_outer_tensor(tensors, "outer/slow", slow_).reshape({-1}));
  momentum_.copy_(saved_outer_tensor(tensors, "outer/momentum", momentum_).reshape({-1}));
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  points_.restore_next(saved_outer_integer(json, "next_sync", tensors));
  last_point_ = saved_outer_integer(json, "last_point", tensors);
  rounds_.load_from(json, tensors);
}

}  // namespace loco::elastic
