#include "loco/elastic/elastic_diloco.h"

#include <fmt/format.h>

#include <algorithm>

#include "loco/algo/adversary.h"
#include "loco/algo/diloco.h"
#include "loco/algo/outer_state_io.h"
#include "loco/algo/pseudo_gradient_average.h"
#include "loco/algo/replica_mean.h"
#include "loco/comm/comm_error.h"
#include "loco/elastic/state_digest.h"
#include "loco/train/replica_state.h"
#include "loco/util/error.h"

namespace loco::elastic {

ElasticDiloco::ElasticDiloco(std::string name, const DilocoConfig& config, const ExchangeConfig& exchange,
                             SyncPoints points, FragmentLayout layout, OuterOverlap overlap,
                             const ReplicaContext& context, QuorumGroup& groups, membership::MemberClient& member,
                             std::uint64_t windows_per_step, double vote_timeout_s)
    : name_(std::move(name)),
      config_(config),
      exchange_(exchange),
      points_(std::move(points)),
      layout_(std::move(layout)),
      overlap_(overlap),
      context_(context),
      member_(context, groups, member, vote_timeout_s),
      windows_per_step_(windows_per_step),
      codec_(exchange_codec(exchange.codec, exchange.block_size)),
      background_(overlap.steps > 0 ? std::make_unique<SerialWorker>() : nullptr) {}

std::string ElasticDiloco::describe() const {
  const std::string overlap =
      name_ == "streaming" ? fmt::format(" tau={} alpha={}", overlap_.steps, overlap_.mix) : std::string();
  return fmt::format("{} (elastic): nesterov(pytorch) eta={} mu={} {}{} codec={}{}{} member {}", name_,
                     config_.outer_lr, config_.outer_momentum, points_.describe(), overlap, exchange_.codec,
                     describe_aggregation(exchange_.aggregation), describe_adversary(exchange_.adversary),
                     member_.member_id());
}

void ElasticDiloco::attach(Llama& model, const FlatParameters& parameters) {
  fragments_ = layout_(model, parameters);
  LOCO_CHECK(fragments_.size() == points_.fragments(), "the synchronisation points expect another number of fragments");
  for (const auto& f : fragments_) outer_.emplace_back(f.read(), config_.outer_lr, config_.outer_momentum);
}

// The first quorum: the run starts (every member at step 0), this member joins a run in progress and heals
// at the others' next synchronisation, or the members resume a run from checkpoints (note "elastic-resume").
void ElasticDiloco::begin() { synchronise(); }

void ElasticDiloco::after_step(std::int64_t step) {
  if (pending_ && step >= outer_step_due(pending_->step)) finish_overlapped();
  const std::int64_t now = context_.replica->step();  // a heal while finishing may have moved it on
  if (last_point_ < now && !points_.due(now).empty()) synchronise();
}

void ElasticDiloco::synchronise() {
  const bool first = !begun_;  // the first quorum of this process (ElasticDiloco::begin)
  begun_ = true;
  bool healed = false;  // this member adopted another's state during this synchronisation: weight 0
  member_.synchronise([this] { return context_.replica->step(); },  // after a heal: the donor's
                      [&](comm::Group& group, const membership::QuorumReply& quorum) {
    if (quorum.step == 0) {  // the run starts: nothing to average yet
      start_round(quorum, context_.replica->step());
      return true;
    }
    healed = member_.heal(group, current_outer_state(), SnapshotSection::strategy).this_member || healed;
    const std::int64_t at = context_.replica->step();
    if (pending_) {
      if (healed) pending_->weight = 0;
      member_.before_exchange();
      if (at < outer_step_due(pending_->step)) {
        // Note "elastic-resume": the members resumed from checkpoints taken while the exchange was in
        // flight. It runs again in the background, and its outer step comes when it would have.
        LOCO_CHECK(first, fmt::format("elastic: the outer step of step {} is retried early", pending_->step));
        exchange_in_background(group, quorum);
        start_round(quorum, at, /*again=*/at == last_point_);
        return true;
      }
      // An overlapped exchange that failed or was refused, retried now (note "elastic-overlap").
      torch::Tensor mean = pending_->delta.clone();
      const PseudoGradientAverage averaged = average(group, mean, pending_->weight, pending_->step);
      if (!decide(group, quorum, pending_->step, at, mean, averaged, /*mix=*/true)) return false;
      start_round(quorum, at);
      return true;
    }
    if (last_point_ >= at || points_.due(at).empty()) {
      // Note "elastic-resume": the members resumed from checkpoints of a step whose synchronisation is done
      // (or of no synchronisation point). The round laid out at that synchronisation is laid out again for
      // this quorum; a round begun earlier was partly read, and the rest of it is skipped.
      LOCO_CHECK(first, fmt::format("elastic: no fragment is due at step {}", at));
      start_round(quorum, at, /*again=*/at == last_point_);
      return true;
    }
    member_.before_exchange();
    // Δ of the due fragments from this member's parameters now (after a heal: the donor's, which then
    // counts nothing), in one exchange.
    torch::Tensor delta = pseudo_gradients(at);
    if (exchange_.adversary) {  // only the member dist.adversary names holds it (cli/train_elastic.h)
      corrupt_pseudo_gradient(exchange_.adversary, delta, exchange_.adversary->replica, at, context_.seed);
    }
    const double weight = healed ? 0.0 : 1.0;
    if (overlaps(at)) {
      Pending& pending = pending_.emplace();
      pending.step = at;
      pending.delta = delta;
      pending.weight = weight;
      exchange_in_background(group, quorum);
      last_point_ = at;
      start_round(quorum, at);
      return true;
    }
    const PseudoGradientAverage averaged = average(group, delta, weight, at);  // Δ is taken anew at a retry
    if (!decide(group, quorum, at, at, delta, averaged, /*mix=*/false)) return false;
    start_round(quorum, at);
    return true;
  });
}

void ElasticDiloco::exchange_in_background(comm::Group& group, const membership::QuorumReply& quorum) {
  Pending& p = *pending_;
  p.quorum = quorum;
  p.group = &group;
  p.mean = p.delta.clone();  // scratch: Δ stays as it was for a retry
  p.averaged = std::make_shared<PseudoGradientAverage>();
  p.exchanged = background_->submit([this, &group, mean = p.mean, weight = p.weight, point = p.step,
                                     averaged = p.averaged]() mutable { *averaged = average(group, mean, weight, point); });
}

void ElasticDiloco::finish_overlapped() {
  torch::NoGradGuard no_grad;
  Pending& p = *pending_;
  try {
    p.exchanged.get();
    // Every member of the quorum votes on the synchronisation point where the exchange began.
    if (decide(*p.group, *p.quorum, p.step, p.step, p.mean, *p.averaged, /*mix=*/true)) return;
  } catch (const comm::CommError& e) {
    member_.give_up(p.quorum, p.step, e.what());
  }
  // Nothing committed: the kept Δ goes again, blocking, with the next quorum. The group was abandoned.
  p.quorum.reset();
  p.group = nullptr;
  p.mean = torch::Tensor();
  synchronise();
}

bool ElasticDiloco::decide(comm::Group& group, const membership::QuorumReply& quorum, std::int64_t point,
                           std::int64_t vote_at, const torch::Tensor& mean, const PseudoGradientAverage& averaged,
                           bool mix) {
  const std::vector<std::size_t> due = points_.due(point);
  std::vector<std::optional<OuterNesterov>> next(outer_.size());
  std::int64_t offset = 0;
  for (const std::size_t p : due) {
    OuterNesterov& candidate = next[p].emplace(outer_[p].global().clone(), config_.outer_lr, config_.outer_momentum);
    candidate.load(outer_[p].global().clone(), outer_[p].momentum_buffer().clone());
    const std::int64_t size = outer_[p].global().numel();
    if (averaged.weight > 0) candidate.step(mean.narrow(0, offset, size));
    offset += size;
  }
  const std::string hash = state_digest(
      outer_state([&](std::size_t p) -> const OuterNesterov& { return next[p] ? *next[p] : outer_[p]; }));
  std::vector<std::string> rejected;  // reported to the coordinator, which removes a member rejected repeatedly
  for (const int rank : averaged.rejected) rejected.push_back(quorum.members.at(static_cast<std::size_t>(rank)));
  const std::optional<membership::CommitReply> decision = member_.vote(quorum.quorum_id, vote_at, hash, rejected);
  if (!decision) return false;  // refused: nothing committed
  if (decision->outcome != membership::Outcome::commit) {  // nothing applied; the next quorum retries
    member_.aborted(vote_at, decision->reason);
    return false;
  }
  for (const std::size_t p : due) outer_[p].load(next[p]->global(), next[p]->momentum_buffer());
  if (!decision->outliers.empty()) share_canonical_state(group, quorum, *decision);
  for (const std::size_t p : due) {
    ParameterFragment& fragment = fragments_[p];
    if (mix) {
      fragment.write(fragment.read().mul_(overlap_.mix).add_(outer_[p].global(), 1 - overlap_.mix));
    } else {
      fragment.write(outer_[p].global());
    }
  }
  ++outer_steps_;
  points_.synced(point);
  last_point_ = std::max(last_point_, point);
  pending_.reset();
  return true;
}

PseudoGradientAverage ElasticDiloco::average(comm::Group& group, torch::Tensor& delta, double weight,
                                             std::int64_t point) const {
  return average_pseudo_gradients(group, delta, codec_.get(), exchange_.aggregation, weight,
                                  fmt::format("elastic {}: the outer step of step {}", name_, point));
}

torch::Tensor ElasticDiloco::pseudo_gradients(std::int64_t point) const {
  std::vector<torch::Tensor> deltas;
  for (const std::size_t p : points_.due(point)) deltas.push_back(outer_[p].pseudo_gradient(fragments_[p].read()));
  return torch::cat(deltas);
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

void ElasticDiloco::start_round(const membership::QuorumReply& quorum, std::int64_t step, bool again) {
  const std::int64_t until = std::min(points_.next_after(step), context_.total_steps);
  const auto windows = static_cast<std::uint64_t>(std::max<std::int64_t>(0, until - step)) * windows_per_step_;
  const std::size_t members = quorum.members.size();
  context_.replica->seek_data(again ? rounds_.restart(members, quorum.rank, windows)
                                    : rounds_.start(members, quorum.rank, windows));
}

void ElasticDiloco::add_log_fields(nlohmann::json& record) {
  record["outer_steps"] = outer_steps_;
  member_.log().add_fields_to(record);
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

NamedTensors ElasticDiloco::current_outer_state() const {
  return outer_state([this](std::size_t p) -> const OuterNesterov& { return outer_[p]; });
}

// A pending outer step travels with the state (a member that heals during its retry takes part in it, with
// weight 0): its synchronisation point, and this member's Δ for a checkpoint.
NamedTensors ElasticDiloco::state_tensors() const {
  NamedTensors out = current_outer_state();
  if (pending_) out.emplace_back("pending/delta", pending_->delta);
  return out;
}

nlohmann::json ElasticDiloco::state_json() const {
  nlohmann::json json = {{"outer_steps", outer_steps_}, {"next_sync", points_.saved_next()}, {"last_point", last_point_}};
  if (pending_) json["pending_step"] = pending_->step;
  rounds_.save_to(json);
  return json;
}

void ElasticDiloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  // Heals happen in synchronise, never while an exchange is in flight.
  LOCO_CHECK(!pending_ || !pending_->exchanged.valid(), "a state was loaded while an exchange was in flight");
  const NamedTensors names = current_outer_state();
  for (std::size_t p = 0; p < outer_.size(); ++p) {
    outer_[p].load(saved_outer_tensor(tensors, names[2 * p].first, outer_[p].global()).clone(),
                   saved_outer_tensor(tensors, names[2 * p + 1].first, outer_[p].momentum_buffer()).clone());
  }
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  points_.restore_next(saved_outer_integer(json, "next_sync", tensors));
  last_point_ = saved_outer_integer(json, "last_point", tensors);
  rounds_.load_from(json, tensors);
  pending_.reset();
  if (json.contains("pending_step")) {
    Pending& p = pending_.emplace();
    p.step = saved_outer_integer(json, "pending_step", tensors);
    std::int64_t size = 0;
    for (const std::size_t f : points_.due(p.step)) size += outer_[f].global().numel();
    p.delta = saved_outer_tensor(tensors, "pending/delta", torch::empty({size})).clone();
  }
}

}  // namespace loco::elastic
