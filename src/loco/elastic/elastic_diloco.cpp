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
                             SyncPoints points, FragmentLayout layout, const ReplicaContext& context,
                             QuorumGroup& groups, membership::MemberClient& member, std::uint64_t windows_per_step,
                             double vote_timeout_s)
    : name_(std::move(name)),
      config_(config),
      exchange_(exchange),
      points_(std::move(points)),
      layout_(std::move(layout)),
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
                     config_.outer_momentum, points_.describe(), exchange_.codec,
                     member_.credentials().member_id);
}

void ElasticDiloco::attach(Llama& model, const FlatParameters& parameters) {
  fragments_ = layout_(model, parameters);
  LOCO_CHECK(fragments_.size() == points_.fragments(), "the synchronisation points expect another number of fragments");
  for (const auto& f : fragments_) outer_.emplace_back(f.read(), config_.outer_lr, config_.outer_momentum);
  // The first quorum: the run starts (every member at step 0), or this member joins a run in progress and
  // heals at the others' next synchronisation.
  synchronise(context_.replica->step());
}

void ElasticDiloco::after_step(std::int64_t step) {
  if (!points_.due(step).empty()) synchronise(step);
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
      const std::vector<std::size_t> due = points_.due(at);  // members only meet at synchronisation points
      LOCO_CHECK(!due.empty(), fmt::format("elastic: no fragment is due at step {}", at));
      if (fault_) fault_->at(FaultMoment::exchanging);
      // Δ of the due fragments from this member's parameters now (after a heal: the donor's, which then
      // counts nothing), in one exchange.
      std::vector<torch::Tensor> deltas;
      for (const std::size_t p : due) deltas.push_back(outer_[p].pseudo_gradient(fragments_[p].read()));
      torch::Tensor mean = torch::cat(deltas);
      const double contributed = replica_mean(group, mean, codec_.get(), healed ? 0.0 : 1.0);
      std::vector<std::optional<OuterNesterov>> next(outer_.size());
      std::int64_t offset = 0;
      for (std::size_t i = 0; i < due.size(); ++i) {
        OuterNesterov& candidate = next[due[i]].emplace(outer_[due[i]].global().clone(), config_.outer_lr,
                                                        config_.outer_momentum);
        candidate.load(outer_[due[i]].global().clone(), outer_[due[i]].momentum_buffer().clone());
        if (contributed > 0) candidate.step(mean.narrow(0, offset, deltas[i].numel()));
        offset += deltas[i].numel();
      }
      const std::string hash = outer_state_digest(
          outer_state([&](std::size_t p) -> const OuterNesterov& { return next[p] ? *next[p] : outer_[p]; }));
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
      for (const std::size_t p : due) outer_[p].load(next[p]->global(), next[p]->momentum_buffer());
      if (!decision->outliers.empty()) share_canonical_state(group, *quorum, *decision);
      for (const std::size_t p : due) fragments_[p].write(outer_[p].global());
      ++outer_steps_;
      points_.synced(at);
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
  const std::string mine = outer_state_digest(state_tensors());
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
    NamedTensors theirs;
    for (const auto& [name, tensor] : state_tensors()) theirs.emplace_back(name, received.strategy.at(name));
    digest = outer_state_digest(theirs);
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
  for (OuterNesterov& outer : outer_) {
    torch::Tensor global = outer.global().clone(), momentum = outer.momentum_buffer().clone();
    group.broadcast(global, canonical);
    group.broadcast(momentum, canonical);
    outer.load(global, momentum);
  }
}

void ElasticDiloco::start_round(const membership::QuorumReply& quorum, std::int64_t step) {
  round_start_ += round_members_ * round_windows_;
  round_members_ = quorum.members.size();
  const std::int64_t until = std::min(points_.next_after(step), context_.total_steps);
  round_windows_ = static_cast<std::uint64_t>(std::max<std::int64_t>(0, until - step)) * windows_per_step_;
  context_.replica->seek_data(round_start_ + static_cast<std::uint64_t>(quorum.rank) * round_windows_);
}

void ElasticDiloco::add_log_fields(nlohmann::json& record) {
  record["outer_steps"] = outer_steps_;
  log_.add_fields_to(record);
}

void ElasticDiloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  std::vector<torch::Tensor> globals;
  for (const OuterNesterov& outer : outer_) globals.push_back(outer.global());
  with_values(fragments_, globals, evaluate);
}

// The names of the non-elastic strategies: "outer/global" for the whole model, "outer/P/global" per fragment.
NamedTensors ElasticDiloco::outer_state(const std::function<const OuterNesterov&(std::size_t)>& outer) const {
  NamedTensors out;
  for (std::size_t p = 0; p < outer_.size(); ++p) {
    const std::string prefix = outer_.size() == 1 ? "outer/" : fmt::format("outer/{}/", p);
    out.emplace_back(prefix + "global", outer(p).global());
    out.emplace_back(prefix + "momentum", outer(p).momentum_buffer());
  }
  return out;
}

NamedTensors ElasticDiloco::state_tensors() const {
  return outer_state([this](std::size_t p) -> const OuterNesterov& { return outer_[p]; });
}

nlohmann::json ElasticDiloco::state_json() const {
  return {{"outer_steps", outer_steps_},
          {"next_sync", points_.saved_next()},
          {"round_start", round_start_},
          {"round_members", round_members_},
          {"round_windows", round_windows_}};
}

void ElasticDiloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  const NamedTensors names = state_tensors();
  for (std::size_t p = 0; p < outer_.size(); ++p) {
    outer_[p].load(saved_outer_tensor(tensors, names[2 * p].first, outer_[p].global()).clone(),
                   saved_outer_tensor(tensors, names[2 * p + 1].first, outer_[p].momentum_buffer()).clone());
  }
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  points_.restore_next(saved_outer_integer(json, "next_sync", tensors));
  round_start_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_start", tensors));
  round_members_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_members", tensors));
  round_windows_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_windows", tensors));
}

std::unique_ptr<Strategy> make_elastic_strategy(const RunConfig& config, const ReplicaContext& context,
                                                QuorumGroup& groups, membership::MemberClient& member) {
  const auto windows_per_step = static_cast<std::uint64_t>(config.replica_batch());
  const double vote_timeout_s = config.comm.timeout_s;
  const FragmentLayout whole = [](Llama&, const FlatParameters& p) {
    return std::vector<ParameterFragment>{whole_model(p)};
  };
  switch (algorithm_named(config.dist.algorithm)) {
    case Algorithm::diloco:
      return std::make_unique<ElasticDiloco>("diloco", config.diloco, config.exchange(),
                                             SyncPoints(SyncSchedule(config.diloco.sync_every, context.total_steps)),
                                             whole, context, groups, member, windows_per_step, vote_timeout_s);
    case Algorithm::localsgd: {
      const SyncSchedule schedule(config.localsgd.sync_every, config.localsgd.qsr_alpha, config.optim,
                                  context.total_steps);
      return std::make_unique<ElasticDiloco>("localsgd", local_sgd_as_diloco(config.localsgd), config.exchange(),
                                             SyncPoints(schedule), whole, context, groups, member, windows_per_step,
                                             vote_timeout_s);
    }
    case Algorithm::streaming: {
      // Without overlap (config checks streaming.overlap = 0): fragments in turn, each an outer step.
      const StreamingConfig s = config.streaming;
      DilocoConfig outer;
      outer.outer_lr = s.outer_lr;
      outer.outer_momentum = s.outer_momentum;
      const auto fragments = static_cast<std::size_t>(s.fragments + (s.embeddings_fragment ? 1 : 0));
      const FragmentLayout blocks = [s](Llama& model, const FlatParameters& p) {
        return block_fragments(p, static_cast<std::int64_t>(model->model->layers->size()), s.fragments,
                               s.assignment == "strided", s.embeddings_fragment);
      };
      return std::make_unique<ElasticDiloco>("streaming", outer, config.exchange(),
                                             SyncPoints(fragments, s.sync_every, context.total_steps), blocks, context,
                                             groups, member, windows_per_step, vote_timeout_s);
    }
    default:
      throw ConfigError(fmt::format("dist.elastic = true works with dist.algorithm diloco, localsgd or streaming so "
                                    "far, not {}",
                                    config.dist.algorithm));
  }
}

}  // namespace loco::elastic
