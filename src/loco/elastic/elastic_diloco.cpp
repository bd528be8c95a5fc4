#include "loco/elastic/elastic_diloco.h"

#include <fmt/format.h>

#include <algorithm>

#include "loco/algo/diloco.h"
#include "loco/algo/outer_state_io.h"
#include "loco/algo/replica_mean.h"
#include "loco/elastic/state_digest.h"
#include "loco/train/replica_state.h"
#include "loco/util/error.h"

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
      member_(context, groups, member, vote_timeout_s),
      windows_per_step_(windows_per_step),
      codec_(exchange_codec(exchange.codec, exchange.block_size)) {}

std::string ElasticDiloco::describe() const {
  return fmt::format("{} (elastic): nesterov(pytorch) eta={} mu={} {} codec={} member {}", name_, config_.outer_lr,
                     config_.outer_momentum, points_.describe(), exchange_.codec,
                     member_.member_id());
}

void ElasticDiloco::attach(Llama& model, const FlatParameters& parameters) {
  fragments_ = layout_(model, parameters);
  LOCO_CHECK(fragments_.size() == points_.fragments(), "the synchronisation points expect another number of fragments");
  for (const auto& f : fragments_) outer_.emplace_back(f.read(), config_.outer_lr, config_.outer_momentum);
  // The first quorum: the run starts (every member at step 0), or this member joins a run in progress and
  // heals at the others' next synchronisation.
  synchronise();
}

void ElasticDiloco::after_step(std::int64_t step) {
  if (!points_.due(step).empty()) synchronise();
}

void ElasticDiloco::synchronise() {
  bool healed = false;  // this member adopted another's state during this synchronisation: weight 0
  member_.synchronise([this] { return context_.replica->step(); },  // after a heal: the donor's
                      [&](comm::Group& group, const membership::QuorumReply& quorum) {
    if (quorum.step == 0) {  // the run starts: nothing to average yet
      start_round(quorum, context_.replica->step());
      return true;
    }
    healed = member_.heal(group, state_tensors(), SnapshotSection::strategy).this_member || healed;
    const std::int64_t at = context_.replica->step();
    const std::vector<std::size_t> due = points_.due(at);  // members only meet at synchronisation points
    LOCO_CHECK(!due.empty(), fmt::format("elastic: no fragment is due at step {}", at));
    member_.before_exchange();
    // Δ of the due fragments from this member's parameters now (after a heal: the donor's, which then
    // counts nothing), in one exchange.
    std::vector<torch::Tensor> deltas;
    for (const std::size_t p : due) deltas.push_back(outer_[p].pseudo_gradient(fragments_[p].read()));
    torch::Tensor mean = torch::cat(deltas);
    const double contributed = replica_mean(group, mean, codec_.get(), healed ? 0.0 : 1.0);
    std::vector<std::optional<OuterNesterov>> next(outer_.size());
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < due.size(); ++i) {
      OuterNesterov& candidate =
          next[due[i]].emplace(outer_[due[i]].global().clone(), config_.outer_lr, config_.outer_momentum);
      candidate.load(outer_[due[i]].global().clone(), outer_[due[i]].momentum_buffer().clone());
      if (contributed > 0) candidate.step(mean.narrow(0, offset, deltas[i].numel()));
      offset += deltas[i].numel();
    }
    const std::string hash = state_digest(
        outer_state([&](std::size_t p) -> const OuterNesterov& { return next[p] ? *next[p] : outer_[p]; }));
    const std::optional<membership::CommitReply> decision = member_.vote(quorum.quorum_id, at, hash);
    if (!decision) return false;  // refused: nothing committed
    if (decision->outcome != membership::Outcome::commit) {  // nothing applied; the next quorum retries
      member_.aborted(at, decision->reason);
      return false;
    }
    for (const std::size_t p : due) outer_[p].load(next[p]->global(), next[p]->momentum_buffer());
    if (!decision->outliers.empty()) share_canonical_state(group, quorum, *decision);
    for (const std::size_t p : due) fragments_[p].write(outer_[p].global());
    ++outer_steps_;
    points_.synced(at);
    start_round(quorum, at);
    return true;
  });
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
  const std::int64_t until = std::min(points_.next_after(step), context_.total_steps);
  const auto windows = static_cast<std::uint64_t>(std::max<std::int64_t>(0, until - step)) * windows_per_step_;
  context_.replica->seek_data(rounds_.start(quorum.members.size(), quorum.rank, windows));
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

NamedTensors ElasticDiloco::state_tensors() const {
  return outer_state([this](std::size_t p) -> const OuterNesterov& { return outer_[p]; });
}

nlohmann::json ElasticDiloco::state_json() const {
  nlohmann::json json = {{"outer_steps", outer_steps_}, {"next_sync", points_.saved_next()}};
  rounds_.save_to(json);
  return json;
}

void ElasticDiloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  const NamedTensors names = state_tensors();
  for (std::size_t p = 0; p < outer_.size(); ++p) {
    outer_[p].load(saved_outer_tensor(tensors, names[2 * p].first, outer_[p].global()).clone(),
                   saved_outer_tensor(tensors, names[2 * p + 1].first, outer_[p].momentum_buffer()).clone());
  }
  outer_steps_ = saved_outer_integer(json, "outer_steps", tensors);
  points_.restore_next(saved_outer_integer(json, "next_sync", tensors));
  rounds_.load_from(json, tensors);
}

}  // namespace loco::elastic
