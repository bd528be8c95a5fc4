#include "loco/elastic/elastic_diloco.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "loco/algo/diloco.h"
#include "loco/algo/outer_state_io.h"
#include "loco/algo/replica_mean.h"
#include "loco/comm/comm_error.h"
#include "loco/config/algorithms.h"
#include "loco/elastic/state_digest.h"
#include "loco/elastic/state_transfer.h"
#include "loco/membership/heal_rules.h"
#include "loco/train/replica_state.h"
#include "loco/util/error.h"
#include "loco/util/seconds_since.h"

namespace loco::elastic {

ElasticDiloco::ElasticDiloco(std::string name, const DilocoConfig& config, const ExchangeConfig& exchange,
                             SyncSchedule schedule, const ReplicaContext& context, QuorumGroup& groups,
                             membership::MemberClient& member, std::uint64_t windows_per_step, double vote_timeout_s)
    : name_(std::move(name)),
      config_(config),
      exchange_(exchange),
      schedule_(schedule),
      context_(context),
      groups_(groups),
      member_(member),
      windows_per_step_(windows_per_step),
      vote_timeout_s_(vote_timeout_s),
      codec_(exchange_codec(exchange.codec, exchange.block_size)),
      fault_(FaultInjection::from_environment()) {
  LOCO_CHECK(context_.replica != nullptr, "an elastic strategy needs the trainer's replica state");
}

std::string ElasticDiloco::describe() const {
  return fmt::format("{} (elastic): nesterov(pytorch) eta={} mu={} {} codec={} member {}", name_, config_.outer_lr,
                     config_.outer_momentum, schedule_.describe(), exchange_.codec,
                     member_.credentials().member_id);
}

void ElasticDiloco::attach(Llama&, const FlatParameters& parameters) {
  parameters_.emplace(whole_model(parameters));
  outer_.emplace(parameters_->read(), config_.outer_lr, config_.outer_momentum);
  // The first quorum: the run starts (every member at step 0), or this member joins a run in progress and
  // heals at the others' next synchronisation.
  synchronise(context_.replica->step());
}

void ElasticDiloco::after_step(std::int64_t step) {
  if (schedule_.due(step)) synchronise(step);
}

void ElasticDiloco::synchronise(std::int64_t step) {
  torch::NoGradGuard no_grad;
  const auto started = SteadyClock::now();
  bool healed = false;  // this member adopted another's state during this synchronisation: weight 0
  while (true) {
    // A member that healed has the donor's step.
    const std::int64_t now = context_.replica->step();
    std::optional<membership::QuorumReply> quorum;
    try {
      const auto asked = SteadyClock::now();
      comm::Group& group = groups_.join_quorum(now);
      quorum = groups_.quorum();
      note_quorum(*quorum, seconds_since(asked));
      if (quorum->step == 0) {  // the run starts: nothing to average yet
        start_round(*quorum, now);
        return;
      }
      healed = heal(group, *quorum) || healed;
      const std::int64_t at = context_.replica->step();
      if (fault_) fault_->at(FaultMoment::exchanging);
      // Δ from this member's parameters now (after a heal: the donor's, which then counts nothing).
      torch::Tensor mean = outer_->pseudo_gradient(parameters_->read());
      const double contributed = replica_mean(group, mean, codec_.get(), healed ? 0.0 : 1.0);
      OuterNesterov next(outer_->global().clone(), config_.outer_lr, config_.outer_momentum);
      next.load(outer_->global().clone(), outer_->momentum_buffer().clone());
      if (contributed > 0) next.step(mean);
      const std::string hash = outer_state_digest(next.global(), next.momentum_buffer());
      const std::optional<membership::CommitReply> decision = vote(quorum->quorum_id, at, hash);
      if (!decision) {
        groups_.abandon();
        continue;
      }
      if (decision->outcome != membership::Outcome::commit) {  // nothing applied; the next quorum retries
        fmt::print(stderr, "elastic: outer step at step {} aborted ({}); retrying with the next quorum\n", at,
                   decision->reason);
        log_.add("abort", at, seconds_since(started), decision->reason);
        continue;
      }
      outer_->load(next.global(), next.momentum_buffer());
      if (!decision->outliers.empty()) share_canonical_state(group, *quorum, *decision);
      parameters_->write(outer_->global());
      ++outer_steps_;
      schedule_.synced(at);
      start_round(*quorum, at);
      return;
    } catch (const comm::CommError& e) {
      // A member failed or stopped during the exchange: vote so that the others learn at once (a refusal
      // only means the run moved on), and retry with the next quorum's group.
      fmt::print(stderr, "elastic: synchronisation at step {} failed ({}); retrying with the next quorum\n",
                 context_.replica->step(), e.what());
      log_.add("abort", context_.replica->step(), seconds_since(started), e.what());
      if (quorum) {
        try {
          member_.vote(quorum->quorum_id, context_.replica->step(), false, "", vote_timeout_s_);
        } catch (const membership::MembershipError&) {
        }
      }
      groups_.abandon();
    }
  }
}

std::optional<membership::CommitReply> ElasticDiloco::vote(std::int64_t quorum_id, std::int64_t step,
                                                          const std::string& hash) {
  try {
    return member_.vote(quorum_id, step, true, hash, vote_timeout_s_);
  } catch (const membership::MembershipError& e) {
    switch (e.refusal()) {
      case membership::Refusal::stale_incarnation:
        // Note "presumed-commit": the coordinator was replaced before its decision reached this member.
        // This member's exchange succeeded, so every member whose exchange succeeded holds the same
        // candidate; the decision could only have been to commit it, or an abort because a member failed,
        // whose members retry and are healed (they are behind) at the next synchronisation. The hash vote
        // there finds any member that differs.
        fmt::print(stderr, "elastic: the coordinator was replaced before deciding the outer step at step {}; "
                           "presumed committed (checked by the next synchronisation's vote)\n", step);
        log_.add("presumed_commit", step, 0, e.what());
        return membership::CommitReply{membership::Outcome::commit, hash, false, {}, ""};
      case membership::Refusal::unknown_member:
      case membership::Refusal::stale_quorum:
        // This member was expired or expelled (its quorum broke), or the quorum was superseded: nothing
        // was committed with this vote.
        fmt::print(stderr, "elastic: vote for the outer step at step {} refused ({}); retrying with the next "
                           "quorum\n", step, e.what());
        log_.add("abort", step, 0, e.what());
        return std::nullopt;
      default:
        throw;
    }
  }
}

void ElasticDiloco::note_quorum(const membership::QuorumReply& quorum, double waited_s) {
  // A rejoin at a replacement coordinator may give the same id: the incarnation tells them apart.
  const membership::Credentials now = member_.credentials();
  if (credentials_ && (credentials_->member_id != now.member_id || credentials_->incarnation != now.incarnation)) {
    log_.add("rejoin", context_.replica->step(), 0,
             fmt::format("{} -> {}{}", credentials_->member_id, now.member_id,
                         credentials_->incarnation != now.incarnation ? " (a new coordinator)" : ""));
  }
  credentials_ = now;
  if (quorum.store_prefix == last_quorum_) return;
  last_quorum_ = quorum.store_prefix;
  const std::string members = fmt::format("{} members ({})", quorum.members.size(), fmt::join(quorum.members, ", "));
  fmt::print(stderr, "elastic: quorum q{} at step {}: {}\n", quorum.quorum_id, quorum.step, members);
  log_.set_quorum(quorum.quorum_id, quorum.members.size(), now.member_id);
  log_.add("quorum", context_.replica->step(), waited_s, fmt::format("q{}: {}", quorum.quorum_id, members));
}

bool ElasticDiloco::heal(comm::Group& group, const membership::QuorumReply& quorum) {
  const auto& steps = quorum.steps;
  if (std::all_of(steps.begin(), steps.end(), [&](std::int64_t s) { return s == quorum.step; })) return false;
  // Every member's outer state digest (64 hex digits), in rank order.
  const std::string mine = outer_state_digest(outer_->global(), outer_->momentum_buffer());
  const auto digest_length = static_cast<std::int64_t>(mine.size());
  torch::Tensor all = torch::empty({group.size() * digest_length}, torch::kUInt8);
  group.all_gather(torch::from_blob(const_cast<char*>(mine.data()), {digest_length}, torch::kUInt8).clone(), all);
  std::vector<std::string> digests;
  for (int r = 0; r < group.size(); ++r) {
    digests.emplace_back(reinterpret_cast<const char*>(all.data_ptr<std::uint8_t>()) + r * digest_length,
                         static_cast<std::size_t>(digest_length));
  }
  const membership::HealPlan plan = membership::plan_heal(steps, digests);
  const std::string sender = quorum.members[static_cast<std::size_t>(plan.donor)];
  const auto started = SteadyClock::now();
  std::string state;
  StateTransferOptions options;
  if (group.rank() == plan.donor) {
    state = context_.replica->encode();
    options.before_sending = [this](std::int64_t chunk, torch::Tensor& outgoing) {
      if (chunk == 0 && fault_ && fault_->at(FaultMoment::donating)) outgoing.data_ptr<std::uint8_t>()[0] ^= 0xff;
    };
  }
  transfer_state(group, state, plan.donor, sender, options);
  if (!std::binary_search(plan.receivers.begin(), plan.receivers.end(), group.rank())) return false;
  // The bytes arrived intact; whether they hold the canonical outer state is checked before anything of
  // them is applied (a donor that is wrong, or lies).
  std::string digest;
  try {
    const LoadedCheckpoint received = decode_replica_snapshot(state, "member " + sender);
    digest = outer_state_digest(received.strategy.at("outer/global"), received.strategy.at("outer/momentum"));
  } catch (const CheckpointError& e) {  // intact bytes that are not a state: the donor's fault, not this member's
    throw comm::CommError(fmt::format("the state from {} cannot be read ({}); it is not applied", sender, e.what()));
  }
  if (digest != plan.canonical_hash) {
    throw comm::CommError(fmt::format("the state from {} holds an outer state whose SHA-256 is {}, not the canonical "
                                      "{}; it is not applied",
                                      sender, digest.substr(0, 16), plan.canonical_hash.substr(0, 16)));
  }
  const std::int64_t was = context_.replica->step();
  context_.replica->adopt(state, "member " + sender);
  const std::string detail = fmt::format("from {}, {:.1f} MB, step {} -> {}", sender, state.size() / 1e6, was,
                                         context_.replica->step());
  fmt::print(stderr, "elastic: healed {}\n", detail);
  log_.add("heal", context_.replica->step(), seconds_since(started), detail);
  return true;
}

void ElasticDiloco::share_canonical_state(comm::Group& group, const membership::QuorumReply& quorum,
                                          const membership::CommitReply& decision) {
  int canonical = 0;
  while (std::binary_search(decision.outliers.begin(), decision.outliers.end(),
                            quorum.members[static_cast<std::size_t>(canonical)])) {
    ++canonical;
  }
  torch::Tensor global = outer_->global().clone(), momentum = outer_->momentum_buffer().clone();
  group.broadcast(global, canonical);
  group.broadcast(momentum, canonical);
  outer_->load(global, momentum);
}

void ElasticDiloco::start_round(const membership::QuorumReply& quorum, std::int64_t step) {
  round_start_ += round_members_ * round_windows_;
  round_members_ = quorum.members.size();
  const std::int64_t until = std::min(schedule_.next(), context_.total_steps);
  round_windows_ = static_cast<std::uint64_t>(std::max<std::int64_t>(0, until - step)) * windows_per_step_;
  context_.replica->seek_data(round_start_ + static_cast<std::uint64_t>(quorum.rank) * round_windows_);
}

void ElasticDiloco::add_log_fields(nlohmann::json& record) {
  record["outer_steps"] = outer_steps_;
  log_.add_fields_to(record);
}

void ElasticDiloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  with_values(*parameters_, outer_->global(), evaluate);
}

NamedTensors ElasticDiloco::state_tensors() const {
  return {{"outer/global", outer_->global()}, {"outer/momentum", outer_->momentum_buffer()}};
}

nlohmann::json ElasticDiloco::state_json() const {
  return {{"outer_steps", outer_steps_},
          {"next_sync", schedule_.next()},
          {"round_start", round_start_},
          {"round_members", round_members_},
          {"round_windows", round_windows_}};
}

void ElasticDiloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  outer_->load(saved_outer_tensor(tensors, "outer/global", outer_->global()).clone(),
               saved_outer_tensor(tensors, "outer/momentum", outer_->momentum_buffer()).clone());
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  schedule_.restore_next(saved_outer_integer(json, "next_sync", tensors));
  round_start_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_start", tensors));
  round_members_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_members", tensors));
  round_windows_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_windows", tensors));
}

std::unique_ptr<Strategy> make_elastic_strategy(const RunConfig& config, const ReplicaContext& context,
                                                QuorumGroup& groups, membership::MemberClient& member) {
  const auto windows_per_step = static_cast<std::uint64_t>(config.replica_batch());
  const double vote_timeout_s = config.comm.timeout_s;
  switch (algorithm_named(config.dist.algorithm)) {
    case Algorithm::diloco:
      return std::make_unique<ElasticDiloco>("diloco", config.diloco, config.exchange(),
                                             SyncSchedule(config.diloco.sync_every, context.total_steps), context,
                                             groups, member, windows_per_step, vote_timeout_s);
    case Algorithm::localsgd: {
      return std::make_unique<ElasticDiloco>(
          "localsgd", local_sgd_as_diloco(config.localsgd), config.exchange(),
          SyncSchedule(config.localsgd.sync_every, config.localsgd.qsr_alpha, config.optim, context.total_steps),
          context, groups, member, windows_per_step, vote_timeout_s);
    }
    default:
      throw ConfigError(fmt::format("dist.elastic = true works with dist.algorithm diloco or localsgd so far, not "
                                    "{}",
                                    config.dist.algorithm));
  }
}

}  // namespace loco::elastic
