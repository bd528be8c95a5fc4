#include "loco/algo/noloco.h"

#include <fmt/format.h>

#include "loco/algo/outer_state_io.h"
#include "loco/algo/pairing.h"

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

Noloco::Noloco(const NolocoConfig& config, SyncSchedule schedule, const ReplicaContext& context)
    : config_(config), schedule_(schedule), context_(context), link_(*context.group, *context.clock) {}

std::string Noloco::describe() const {
  return fmt::format("noloco: heavy-ball(authors' code form) alpha={} beta={} gamma={} {} M={} pairs (seeded)",
                     config_.momentum, config_.beta, config_.gamma, schedule_.describe(),
                     context_.group->size());
}

void Noloco::attach(Llama&, const FlatParameters& parameters) {
  parameters_.emplace(whole_model(parameters));
  slow_ = parameters_->read();
  momentum_ = torch::zeros_like(slow_);
}

void Noloco::after_step(std::int64_t step) {
  if (schedule_.due(step)) sync(step);
}

void Noloco::sync(std::int64_t step) {
  torch::NoGradGuard no_grad;
  comm::Group& group = *context_.group;
  const auto members = group_of(replica_groups(context_.seed, outer_steps_, group.size()), group.rank());
  // (θ − φ, φ) of this replica, averaged with every other member's.
  const torch::Tensor mine = torch::cat({parameters_->read().sub_(slow_), slow_});
  torch::Tensor mean;
  // Every rank averages at this step, in pairs when the replicas are even in number (note "measured-link").
  const auto group_wide = group.size() % 2 == 0 ? comm::GroupWide::yes : comm::GroupWide::no;
  link_.exchange_and_wait([&] { mean = group_mean(group, mine, members, group_wide); });
  noloco_outer_step(config_, mean, slow_, momentum_);
  parameters_->write(slow_);
  ++outer_steps_;
  schedule_.synced(step);
}

void Noloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  with_values(*parameters_, slow_, evaluate);
}

NamedTensors Noloco::state_tensors() const { return {{"outer/slow", slow_}, {"outer/momentum", momentum_}}; }

nlohmann::json Noloco::state_json() const { return {{"outer_steps", outer_steps_}, {"next_sync", schedule_.next()}}; }

void Noloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  slow_.copy_(saved_outer_tensor(tensors, "outer/slow", slow_).reshape({-1}));
  momentum_.copy_(saved_outer_tensor(tensors, "outer/momentum", momentum_).reshape({-1}));
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  schedule_.restore_next(saved_outer_integer(json, "next_sync", tensors));
}

}  // namespace loco
