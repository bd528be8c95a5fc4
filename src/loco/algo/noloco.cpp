#include "loco/algo/noloco.h"

#include <fmt/format.h>

#include <algorithm>

#include "loco/algo/outer_state_io.h"
#include "loco/algo/pairing.h"
#include "loco/comm/comm_error.h"

namespace loco {

torch::Tensor group_mean(comm::Group& group, const torch::Tensor& mine, const std::vector<int>& members,
                         comm::GroupWide group_wide) {
  const torch::Tensor flat = mine.reshape({-1});
  const std::vector<torch::Tensor> theirs = comm::exchange_among(group, flat, members, group_wide);
  torch::Tensor mean = torch::zeros_like(flat);
  for (std::size_t k = 0; k < members.size(); ++k) mean.add_(members[k] == group.rank() ? flat : theirs[k]);
  return mean.div_(static_cast<double>(members.size())).view(mine.sizes());
}

void noloco_outer_step(const NolocoConfig& config, const torch::Tensor& mean, torch::Tensor& slow,
                       torch::Tensor& momentum) {
  const std::int64_t n = slow.numel();
  const torch::Tensor mean_progress = mean.narrow(0, 0, n);  // mean_G(θ − φ)
  const torch::Tensor mean_slow = mean.narrow(0, n, n);      // mean_G(φ)
  momentum.mul_(config.momentum).add_(mean_progress, config.beta).add_(mean_slow - slow, config.gamma);
  slow.add_(momentum);
}

Noloco::Noloco(const NolocoConfig& config, const ReplicaContext& context)
    : config_(config),
      points_(SyncSchedule(config.sync_every, context.total_steps)),
      context_(context),
      membership_(*context.membership),
      link_(*context.clock) {}

std::string Noloco::describe() const {
  return fmt::format("noloco: heavy-ball(authors' code form) alpha={} beta={} gamma={} {} {} groups of two (seeded)",
                     config_.momentum, config_.beta, config_.gamma, points_.describe(), membership_.describe());
}

void Noloco::attach(Llama&, const FlatParameters& parameters) {
  parameters_.emplace(whole_model(parameters));
  slow_ = parameters_->read();
  momentum_ = torch::zeros_like(slow_);
}

Membership::Synchronisation Noloco::synchronisation() {
  return {[this] { return state_tensors(); }, /*alike=*/false,
          [this](const Participants& who) { return attempt(who); }};
}

// The first synchronisation of a membership whose members change: the run starts, this replica joins a run
// in progress and heals at the others' next synchronisation, or the members resume from checkpoints.
void Noloco::begin() { membership_.begin(synchronisation()); }

void Noloco::after_step(std::int64_t step) {
  if (membership_.last_point() < step && !points_.due(step).empty()) {
    membership_.synchronise(step, synchronisation());
  }
}

bool Noloco::attempt(const Participants& who) {
  // Note "elastic-resume" (elastic/quorum_membership.h): members that resumed from checkpoints of a step whose
  // synchronisation is done (or of no synchronisation point) have nothing to average; the round laid out there
  // is laid out again, or goes on where each member stopped reading it (note "resume-inside-round").
  const bool resumed = membership_.last_point() >= who.step || points_.due(who.step).empty();
  const RoundStart start = !resumed                               ? RoundStart::fresh
                           : who.step == membership_.last_point() ? RoundStart::again
                                                                  : RoundStart::resumed;
  if (who.step > 0 && !resumed && !who.adopted_state) average(who);
  // Inside a round the next point is the one the checkpoint restored (a sync recorded here moved it H steps on).
  if (who.step > 0 && start != RoundStart::resumed) points_.synced(who.step);
  membership_.round_begins(who, who.step, points_.next_after(who.step) - who.step, start);
  return true;
}

void Noloco::average(const Participants& who) {
  torch::NoGradGuard no_grad;
  comm::Group& group = *who.group;
  std::vector<int> averaging;  // ranks of the participants that did not heal
  for (int r = 0; r < group.size(); ++r) {
    if (!std::binary_search(who.adopted.begin(), who.adopted.end(), r)) averaging.push_back(r);
  }
  // The synchronisation points before this one: every participant counts the same, whatever rounds it
  // missed (in a static run, the outer steps done).
  const std::int64_t round = (who.step - 1) / config_.sync_every;
  const auto position = std::find(averaging.begin(), averaging.end(), group.rank()) - averaging.begin();
  std::vector<int> members;
  for (const int k :
       group_of(replica_groups(context_.seed, round, static_cast<int>(averaging.size())), static_cast<int>(position))) {
    members.push_back(averaging[static_cast<std::size_t>(k)]);
  }
  // (θ − φ, φ) of this replica, averaged with every other member's. Every rank averages at once, in pairs,
  // when they are even in number and none can be missing (note "measured-link").
  const torch::Tensor mine = torch::cat({parameters_->read().sub_(slow_), slow_});
  // A replica alone (the run's only one, or the only member left) is a group of one: the update with its own
  // (θ − φ, φ) as the means, m ← α·m + β·(θ − φ). Before, it skipped the step, so φ, the model evaluated, never
  // left the starting weights while θ trained.
  torch::Tensor mean = mine;
  if (members.size() > 1) {
    const bool everyone = averaging.size() == static_cast<std::size_t>(group.size()) && !membership_.may_abort();
    const auto group_wide = everyone && group.size() % 2 == 0 ? comm::GroupWide::yes : comm::GroupWide::no;
    try {
      membership_.before_exchange();
      link_.exchange_and_wait(group, [&] { mean = group_mean(group, mine, members, group_wide); });
    } catch (const comm::CommError&) {
      membership_.skipped(who, members, std::current_exception());
      return;
    }
  }
  noloco_outer_step(config_, mean, slow_, momentum_);
  parameters_->write(slow_);
  ++outer_steps_;
  membership_.commit(who, {}, {}, {});
}

void Noloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  with_values(*parameters_, slow_, evaluate);
}

void Noloco::add_log_fields(nlohmann::json& record) { membership_.add_log_fields(record); }

NamedTensors Noloco::state_tensors() const { return {{"outer/slow", slow_}, {"outer/momentum", momentum_}}; }

nlohmann::json Noloco::state_json() const {
  nlohmann::json json = {{"outer_steps", outer_steps_}, {"next_sync", points_.saved_next()}};
  membership_.save_to(json);
  return json;
}

nlohmann::json Noloco::schedule_of(const nlohmann::json& saved) const {
  return {{"outer_steps", saved.value("outer_steps", nlohmann::json())},
          {"next_sync", saved.value("next_sync", nlohmann::json())}};
}

void Noloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  slow_.copy_(saved_outer_tensor(tensors, "outer/slow", slow_).reshape({-1}));
  momentum_.copy_(saved_outer_tensor(tensors, "outer/momentum", momentum_).reshape({-1}));
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  points_.restore_next(saved_outer_integer(json, "next_sync", tensors));
  membership_.load_from(json, tensors);
}

}  // namespace loco
