#include "loco/algo/diloco.h"

#include <fmt/format.h>

#include <random>

#include "loco/algo/adversary.h"
#include "loco/algo/outer_state_io.h"
#include "loco/algo/replica_hash.h"
#include "loco/algo/pseudo_gradient_average.h"
#include "loco/algo/replica_mean.h"
#include "loco/util/portable_random.h"

namespace loco {

Diloco::Diloco(const DilocoConfig& config, const ExchangeConfig& exchange, SyncSchedule schedule,
               const ReplicaContext& context)
    : Diloco("diloco", config, exchange, schedule, context) {}

DilocoConfig local_sgd_as_diloco(const LocalsgdConfig& config) {
  // θ_g becomes the replicas' average.
  DilocoConfig average;
  average.sync_every = config.sync_every;
  average.outer_lr = 1;
  average.outer_momentum = 0;
  return average;
}

std::unique_ptr<Diloco> Diloco::local_sgd(const LocalsgdConfig& config, const OptimConfig& optim,
                                          const ExchangeConfig& exchange, const ReplicaContext& context) {
  SyncSchedule schedule(config.sync_every, config.qsr_alpha, optim, context.total_steps);
  return std::unique_ptr<Diloco>(new Diloco("localsgd", local_sgd_as_diloco(config), exchange, schedule, context));
}

Diloco::Diloco(std::string name, const DilocoConfig& config, const ExchangeConfig& exchange, SyncSchedule schedule,
               const ReplicaContext& context)
    : name_(std::move(name)),
      config_(config),
      exchange_(exchange),
      schedule_(schedule),
      context_(context),
      link_(*context.group, *context.clock),
      codec_(exchange_codec(exchange.codec, exchange.block_size)) {}

std::string Diloco::describe() const {
  return fmt::format("{}: nesterov(pytorch) eta={} mu={} {} M={} codec={}{}{}{}{}", name_, config_.outer_lr,
                     config_.outer_momentum, schedule_.describe(), context_.group->size(), exchange_.codec,
                     describe_aggregation(exchange_.aggregation), config_.weighted ? " weighted-by-tokens" : "",
                     config_.drop_rate > 0 ? fmt::format(" drop_rate={}", config_.drop_rate) : "",
                     describe_adversary(exchange_.adversary));
}

void Diloco::attach(Llama&, const FlatParameters& parameters) {
  parameters_.emplace(whole_model(parameters));
  outer_.emplace(parameters_->read(), config_.outer_lr, config_.outer_momentum);
}

void Diloco::after_step(std::int64_t step) {
  tokens_since_sync_ += context_.tokens_per_step;
  if (schedule_.due(step)) sync(step);
}

bool Diloco::dropped(std::int64_t outer_step) const {
  if (config_.drop_rate <= 0) return false;
  std::mt19937_64 rng(mix_seed(mix_seed(context_.seed, static_cast<std::uint64_t>(outer_step)),
                                     static_cast<std::uint64_t>(context_.group->rank())));
  constexpr std::uint64_t kResolution = std::uint64_t{1} << 53;
  return static_cast<double>(uniform_below(rng, kResolution)) / kResolution < config_.drop_rate;
}

void Diloco::sync(std::int64_t step) {
  comm::Group& group = *context_.group;
  torch::Tensor delta = outer_->pseudo_gradient(parameters_->read());
  corrupt_pseudo_gradient(exchange_.adversary, delta, group.rank(), step, context_.seed);
  std::optional<double> weight;
  if (config_.weighted || config_.drop_rate > 0) {
    weight = dropped(outer_steps_) ? 0.0 : (config_.weighted ? static_cast<double>(tokens_since_sync_) : 1.0);
  }
  double contributed = 0;
  link_.exchange_and_wait([&] {
    contributed = average_pseudo_gradients(group, delta, codec_.get(), exchange_.aggregation, weight,
                                           fmt::format("{}: the outer step after step {}", name_, step))
                      .weight;
  });
  if (contributed > 0) outer_->step(delta);
  parameters_->write(outer_->global());
  ++outer_steps_;
  tokens_since_sync_ = 0;
  schedule_.synced(step);
  if (exchange_.check_sync) {
    require_identical_across_replicas(group, outer_->global(),
                                      fmt::format("global parameters after outer step {}", outer_steps_));
  }
}

void Diloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  with_values(*parameters_, outer_->global(), evaluate);
}

NamedTensors Diloco::state_tensors() const {
  return {{"outer/global", outer_->global()}, {"outer/momentum", outer_->momentum_buffer()}};
}

nlohmann::json Diloco::state_json() const {
  return {{"outer_steps", outer_steps_}, {"next_sync", schedule_.next()}, {"tokens_since_sync", tokens_since_sync_}};
}

void Diloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  outer_->load(saved_outer_tensor(tensors, "outer/global", outer_->global()),
               saved_outer_tensor(tensors, "outer/momentum", outer_->momentum_buffer()));
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  schedule_.restore_next(saved_outer_integer(json, "next_sync", tensors));
  tokens_since_sync_ = saved_outer_integer(json, "tokens_since_sync", tensors);
}

}  // namespace loco
