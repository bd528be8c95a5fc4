#include "loco/algo/diloco.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "loco/algo/adversary.h"
#include "loco/algo/replica_hash.h"
#include "loco/algo/replica_mean.h"
#include "loco/comm/comm_error.h"
#include "loco/util/error.h"
#include "loco/util/portable_random.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"

namespace loco {

namespace {
double steady_seconds() { return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count(); }
}  // namespace

OuterStepSettings local_sgd_settings() {
  OuterStepSettings average;  // θ_g becomes the replicas' average
  average.name = "localsgd";
  average.outer_lr = 1;
  average.outer_momentum = 0;
  return average;
}

Diloco::Diloco(OuterStepSettings settings, const ExchangeConfig& exchange, SyncPoints points,
               const ReplicaContext& context)
    : settings_(std::move(settings)),
      exchange_(exchange),
      points_(std::move(points)),
      context_(context),
      membership_(*context.membership),
      link_(*context.clock),
      codec_(exchange_codec(exchange.codec, exchange.block_size)) {
  // A thread of its own runs the exchanges that overlap inner steps; blocking ones run on the training's.
  if (settings_.overlap > 0 || settings_.overlap_auto) background_ = std::make_unique<SerialWorker>();
  if (settings_.overlap_auto) {
    const bool emulated =
        settings_.simulated_replicas && context.group != nullptr && context.group->options().link.emulates_anything();
    tuner_.emplace(points_.every() - 1, emulated, *context.clock, membership_.replica() == 0);
  }
}

Diloco::~Diloco() = default;

std::string Diloco::describe() const {
  std::string fragments;
  if (settings_.streaming) {
    const std::string tau =
        settings_.overlap_auto ? fmt::format("auto (from {})", settings_.overlap) : std::to_string(settings_.overlap);
    fragments = fmt::format(" fragments={} ({}{}) tau={} alpha={}", fragments_.size(),
                            settings_.strided ? "strided" : "sequential",
                            settings_.embeddings_fragment ? ", embeddings separate" : "", tau, settings_.mix);
  }
  if (settings_.sparse) {
    return fmt::format("{}: error feedback beta={}, {}, average over the {}{}; outer sgd eta={} {} {}{}",
                       settings_.name, settings_.sparse->beta, sparse_layouts_.front().describe(),
                       settings_.sparse->over_contributors ? "replicas that sent each value" : "replicas",
                       describe_aggregation(exchange_.aggregation), settings_.outer_lr, points_.describe(),
                       membership_.describe(), describe_adversary(exchange_.adversary));
  }
  const bool overlapped_diloco =
      settings_.streaming && fragments_.size() == 1 && (settings_.overlap > 0 || settings_.overlap_auto);
  return fmt::format("{}{}: nesterov(pytorch) eta={} mu={} {}{} {} codec={}{}{}{}{}", settings_.name,
                     overlapped_diloco ? " (overlapped DiLoCo)" : "", settings_.outer_lr, settings_.outer_momentum,
                     points_.describe(), fragments, membership_.describe(), exchange_.codec,
                     describe_aggregation(exchange_.aggregation), settings_.weighted ? " weighted-by-tokens" : "",
                     settings_.drop_rate > 0 ? fmt::format(" drop_rate={}", settings_.drop_rate) : "",
                     describe_adversary(exchange_.adversary));
}

void Diloco::attach(Llama& model, const FlatParameters& parameters) {
  if (settings_.streaming) {
    fragments_ = block_fragments(parameters, model->config().num_hidden_layers,
                                 settings_.fragments, settings_.strided, settings_.embeddings_fragment);
  } else {
    fragments_.push_back(whole_model(parameters));
  }
  LOCO_CHECK(fragments_.size() == points_.fragments(), "{} fragments for synchronisation points of {}",
             fragments_.size(), points_.fragments());
  for (const auto& f : fragments_) {
    outer_.emplace_back(f.read(), settings_.outer_lr, settings_.outer_momentum);
    if (settings_.sparse) {
      sparse_layouts_.emplace_back(f.shapes(), *settings_.sparse);
      accumulators_.push_back(torch::zeros({f.numel()}, torch::kFloat32));
    }
  }
  outer_steps_.assign(fragments_.size(), 0);
  overlap_.assign(fragments_.size(), settings_.overlap);
}

Membership::Synchronisation Diloco::synchronisation() {
  return {[this] { return outer_state(); }, /*alike=*/true, [this](const Participants& who) { return attempt(who); }};
}

// The first synchronisation of a membership whose members change: the run starts, this replica joins a run
// in progress and heals at the others' next synchronisation, or the members resume from checkpoints.
void Diloco::begin() { membership_.begin(synchronisation()); }

void Diloco::after_step(std::int64_t step) {
  const bool was_exchanging = !in_flight_.empty();
  tokens_since_sync_ += context_.tokens_per_step;
  if (tuner_) tuner_->step_begins();
  // At the last step the exchanges in flight land before the last synchronisation.
  if (step == context_.total_steps) finish_due(step);
  if (membership_.last_point() < step && !points_.due(step).empty()) {
    membership_.synchronise(step, synchronisation());
  }
  finish_due(step);
  if (tuner_) tuner_->step_ends();
  // Note "graceful-stop": the replicas met after this step if they exchanged in it (a synchronisation began,
  // or exchanges in flight landed) and none is left in flight: one still running in the background could
  // reach the group after the trainer's agreement on one replica and before it on another. With exchanges
  // always in flight (Streaming with τ at least its fragments' spacing) they never meet before the last step.
  if (in_flight_.empty() && (was_exchanging || membership_.last_point() == step)) met_at_ = step;
}

bool Diloco::attempt(const Participants& who) {
  if (who.step == 0) {  // the run starts: nothing to exchange yet
    begin_round(who, 0);
    return true;
  }
  // The accumulators a heal brought are the donor's, which the donor sends itself.
  if (who.adopted_state) {
    for (torch::Tensor& e : accumulators_) e = torch::zeros_like(e);
  }
  if (!to_retry_.empty()) return retry(who);
  if (membership_.last_point() >= who.step || points_.due(who.step).empty()) {
    // Note "elastic-resume" (elastic/quorum_membership.h): the members resumed from checkpoints of a step whose
    // synchronisation is done, or of no synchronisation point. The round laid out at that synchronisation is
    // laid out again; a round begun earlier was partly read, and goes on where each member stopped reading it
    // (note "resume-inside-round").
    begin_round(who, who.step, who.step == membership_.last_point() ? RoundStart::again : RoundStart::resumed);
    return true;
  }
  membership_.before_exchange();
  return land(start(who), who);
}

bool Diloco::land(std::vector<Exchange> xs, const Participants& who) {
  if (std::any_of(xs.begin(), xs.end(), [&](const Exchange& x) { return x.apply_after > who.step; })) {
    // finish_due lands them. Note "elastic-resume" (elastic/quorum_membership.h): members that resumed from
    // checkpoints taken while an exchange was in flight run it again, and its round is laid out anew.
    const std::int64_t point = xs.front().point;
    for (Exchange& x : xs) in_flight_.push_back(std::move(x));
    begin_round(who, point, who.step == membership_.last_point() ? RoundStart::again : RoundStart::fresh);
    return true;
  }
  if (!finish(xs)) {
    keep_for_retry(std::move(xs));
    return false;
  }
  begin_round(who, xs.front().point);
  return true;
}

std::vector<Diloco::Exchange> Diloco::start(const Participants& who) {
  const std::int64_t t = who.step;
  const std::uint64_t sync = ++syncs_begun_;
  std::vector<Exchange> xs;
  for (const std::size_t p : points_.due(t)) {
    // A fragment the schedule names takes its τ (predicted before its first exchange); the others sync at
    // the last step without overlap.
    const bool scheduled = points_.scheduled(p, t);
    if (scheduled && tuner_ && outer_steps_[p] == 0) {
      comm::Group& group = *who.group;
      tuner_->predict_first(
          fragments_[p].name(), exchange_bytes(p), group.size(), group.options().link,
          [&](double mine) {
            double agreed = 0;
            on_group_thread(group, [&] { agreed = timing_across(group, {0, mine}).step_s; });
            return agreed;
          },
          overlap_[p]);
    }
    const std::int64_t tau = scheduled ? overlap_[p] : 0;
    Exchange& x = xs.emplace_back();
    x.sync = sync;
    x.point = t;
    x.fragment = p;
    x.apply_after = std::min(t + tau, context_.total_steps);
    x.mix = tau > 0;
    x.who = who;
    const torch::Tensor local = fragments_[p].read();
    // Alone and blocking, the outer step is computed from θ_m (OuterNesterov::step_alone). An overlapped
    // exchange may be checkpointed in flight, which keeps its result but not θ_m: it takes step(), live and
    // resumed alike (as does a retry, keep_for_retry).
    if (who.group->size() == 1 && tau == 0) x.alone_local = local.clone();
    x.delta = outer_[p].pseudo_gradient(local);
    corrupt_pseudo_gradient(exchange_.adversary, x.delta, membership_.replica(), t, context_.seed);
    x.weight = weight(who, p);
    exchange(x);
  }
  return xs;
}

std::optional<double> Diloco::weight(const Participants& who, std::size_t fragment) const {
  // Without weights every contribution counts alike and the mean is one plain all-reduce.
  if (!settings_.weighted && settings_.drop_rate <= 0 && !membership_.may_abort()) return std::nullopt;
  if (who.adopted_state || dropped(who.group->rank(), outer_steps_[fragment])) return 0.0;
  return settings_.weighted ? static_cast<double>(tokens_since_sync_) : 1.0;
}

bool Diloco::dropped(int rank, std::int64_t outer_step) const {
  if (settings_.drop_rate <= 0) return false;
  std::mt19937_64 rng(
      mix_seed(mix_seed(context_.seed, static_cast<std::uint64_t>(outer_step)), static_cast<std::uint64_t>(rank)));
  constexpr std::uint64_t kResolution = std::uint64_t{1} << 53;
  return static_cast<double>(uniform_below(rng, kResolution)) / kResolution < settings_.drop_rate;
}

bool Diloco::every_replica_dropped(const comm::Group& group, std::size_t fragment) const {
  for (int rank = 0; rank < group.size(); ++rank) {
    if (!dropped(rank, outer_steps_[fragment])) return false;
  }
  return true;
}

std::int64_t Diloco::exchange_bytes(std::size_t fragment) const {
  if (settings_.sparse) return static_cast<std::int64_t>(sparse_layouts_[fragment].payload_bytes());
  const auto count = fragments_[fragment].numel();
  return codec_ ? static_cast<std::int64_t>(codec_->encoded_bytes(static_cast<std::size_t>(count)))
                : count * static_cast<std::int64_t>(sizeof(float));
}

void Diloco::exchange(Exchange& x) {
  // While the membership may abort, Δ is kept for another attempt and the average goes into a copy.
  x.mean = membership_.may_abort() ? x.delta.clone() : x.delta;
  x.result = std::make_shared<Exchange::Result>();
  x.on_link = false;
  comm::Group& group = *x.who.group;
  std::string what =
      fmt::format("{}: the outer step of {} after step {}", settings_.name, fragments_[x.fragment].name(), x.who.step);
  if (!background_) {
    // Blocking: the start is read after the call, so the compute it spent (encoding) comes before the
    // link time, not under it.
    x.result->emulated_s = LinkTimeline::charged_seconds(group, averaging(x, std::move(what)));
    x.started_at = link_.start_time();
    link_.occupy(x.started_at, x.result->emulated_s);  // the next exchange starts after it
    x.on_link = true;
    std::promise<void> ready;
    ready.set_value();
    x.done = ready.get_future();
    return;
  }
  x.started_at = link_.start_time();
  // Note "overlap-auto": E runs from here, on the clock the tuner reads.
  const bool tuning = tuner_.has_value();
  const double sent_at = tuning ? tuner_->now() : 0;
  const double step_s = tuning ? tuner_->take_step_seconds() : 0;
  const bool emulated = tuning && tuner_->emulated();
  // The job is the group's only user while it runs (SerialWorker), as charged_seconds needs.
  x.done = background_->submit([&group, average = averaging(x, std::move(what)), result = x.result,
                                started_at = x.started_at, tuning, sent_at, step_s, emulated]() mutable {
    const comm::BackgroundWaits background;  // training goes on meanwhile: not its wait
    result->emulated_s = LinkTimeline::charged_seconds(group, average);
    if (!tuning) return;
    // On the emulated link the average is ready when the link has carried it (LinkTimeline).
    const double ready_at = emulated ? started_at + result->emulated_s : steady_seconds();
    result->emulated_s += LinkTimeline::charged_seconds(group, [&] {
      result->timing = timing_across(group, {ready_at - sent_at, step_s});
    });
  });
}

std::function<void()> Diloco::averaging(const Exchange& x, std::string what) const {
  comm::Group& group = *x.who.group;
  if (!settings_.sparse) {
    return [&group, mean = x.mean, weight = x.weight, codec = codec_.get(), aggregation = exchange_.aggregation,
            result = x.result, what = std::move(what)]() mutable {
      result->averaged = average_pseudo_gradients(group, mean, codec, aggregation, weight, what);
    };
  }
  return [&group, mean = x.mean, layout = &sparse_layouts_[x.fragment], settings = *settings_.sparse,
          aggregation = exchange_.aggregation, accumulator = accumulators_[x.fragment],
          weight = x.weight.value_or(1.0), own_work = !x.who.adopted_state, result = x.result,
          what = std::move(what)]() mutable {
    SparseRound round = sparse_exchange(group, *layout, settings, aggregation, accumulator, mean, weight, own_work, what);
    result->averaged = std::move(round.averaged);
    result->accumulator = std::move(round.accumulator);
  };
}

// A checkpoint keeps a retry's Δ, not θ_m: a retry takes OuterNesterov::step, live and resumed alike.
void Diloco::keep_for_retry(std::vector<Exchange> xs) {
  for (Exchange& x : xs) x.alone_local = torch::Tensor();
  to_retry_ = std::move(xs);
}

bool Diloco::retry(const Participants& who) {
  std::vector<Exchange> xs = std::move(to_retry_);
  to_retry_.clear();
  membership_.before_exchange();
  const std::uint64_t sync = ++syncs_begun_;
  for (Exchange& x : xs) {
    x.sync = sync;
    x.who = who;
    // A replica that healed meanwhile holds its donor's Δ (it came with the state), which counts nothing.
    if (who.adopted_state) x.weight = 0.0;
    exchange(x);
  }
  return land(std::move(xs), who);
}

void Diloco::finish_due(std::int64_t step) {
  while (!in_flight_.empty() && in_flight_.front().apply_after <= step) {
    std::vector<Exchange> xs;
    const std::uint64_t sync = in_flight_.front().sync;
    while (!in_flight_.empty() && in_flight_.front().sync == sync && in_flight_.front().apply_after <= step) {
      xs.push_back(std::move(in_flight_.front()));
      in_flight_.pop_front();
    }
    if (finish(xs)) continue;
    // Note "elastic-overlap" (elastic/quorum_membership.h): nothing was committed; the kept Δ goes again,
    // blocking, with the next participants.
    keep_for_retry(std::move(xs));
    membership_.synchronise(step, synchronisation());
  }
}

bool Diloco::finish(std::vector<Exchange>& xs) {
  torch::NoGradGuard no_grad;
  const Participants who = xs.front().who;
  // Every exchange of the synchronisation is waited for, failed or not, before its group may be abandoned.
  std::exception_ptr failure;
  for (Exchange& x : xs) {
    try {
      wait_for_background(*who.group, [&] { x.done.get(); });
    } catch (const comm::CommError&) {
      failure = std::current_exception();
    }
  }
  if (failure) {
    membership_.failed(who, failure);  // a fixed membership rethrows: the run ends
    return false;
  }
  std::vector<std::optional<OuterNesterov>> candidates(outer_.size());
  std::vector<int> rejected;
  for (Exchange& x : xs) {
    if (!x.on_link) link_.occupy(x.started_at, x.result->emulated_s);
    link_.wait();
    if (tuner_)
      tuner_->adopt_measured(fragments_[x.fragment].name(), exchange_bytes(x.fragment), x.result->timing,
                             overlap_[x.fragment]);
    // Where the membership may abort, the outer step goes to a copy until it commits.
    OuterNesterov& outer =
        membership_.may_abort() ? candidates[x.fragment].emplace(outer_[x.fragment].copy()) : outer_[x.fragment];
    if (x.result->averaged.weight > 0) {
      if (x.alone_local.defined()) {
        outer.step_alone(x.mean, x.alone_local);
      } else {
        outer.step(x.mean);
      }
    } else if (who.group->rank() == 0 && every_replica_dropped(*who.group, x.fragment)) {
      // Said once, as a step left out for NaN is: a rate near 1 otherwise trained nothing without a word.
      loco::print_unchecked(stderr,
                            "{}: the outer step of {} after step {} left out every replica's pseudo-gradient "
                            "(diloco.drop_rate = {}): the global parameters stay as they were\n",
                            settings_.name, fragments_[x.fragment].name(), who.step, settings_.drop_rate);
    }
    rejected.insert(rejected.end(), x.result->averaged.rejected.begin(), x.result->averaged.rejected.end());
  }
  bool taken = false;
  const auto take_candidates = [&] {
    if (std::exchange(taken, true)) return;
    for (std::size_t p = 0; p < outer_.size(); ++p) {
      if (candidates[p]) outer_[p].load(candidates[p]->global(), candidates[p]->momentum_buffer());
    }
  };
  const auto take_canonical = [&](comm::Group& group, int root) {
    take_candidates();
    for (OuterNesterov& outer : outer_) {
      torch::Tensor global = outer.global().clone(), momentum = outer.momentum_buffer().clone();
      group.broadcast(global, root);
      group.broadcast(momentum, root);
      outer.load(global, momentum);
    }
  };
  std::sort(rejected.begin(), rejected.end());
  rejected.erase(std::unique(rejected.begin(), rejected.end()), rejected.end());
  if (!membership_.commit(
          who, [&] { return outer_state(candidates); }, rejected, take_canonical))
    return false;
  take_candidates();
  for (const Exchange& x : xs) {
    if (settings_.sparse) accumulators_[x.fragment] = x.result->accumulator;
    ParameterFragment& fragment = fragments_[x.fragment];
    const torch::Tensor& global = outer_[x.fragment].global();
    fragment.write(x.mix ? fragment.read().mul_(settings_.mix).add_(global, 1 - settings_.mix) : global);
    ++outer_steps_[x.fragment];
    if (exchange_.check_sync) {
      const std::string what =
          fmt::format("global parameters of {} after its outer step {}", fragment.name(), outer_steps_[x.fragment]);
      comm::Group& group = *who.group;
      on_group_thread(group, [&] { require_identical_across_replicas(group, global, what); });
    }
  }
  tokens_since_sync_ = 0;
  points_.synced(who.step);
  return true;
}

void Diloco::begin_round(const Participants& who, std::int64_t point, RoundStart start) {
  membership_.round_begins(who, point, points_.next_after(who.step) - who.step, start);
}

void Diloco::settle_exchanges() {
  for (Exchange& x : in_flight_) {
    if (x.done.valid()) wait_for_background(*x.who.group, [&] { x.done.wait(); });
  }
}

void Diloco::wait_for_background(comm::Group& group, const std::function<void()>& wait) const {
  const auto started = SteadyClock::now();
  wait();
  group.record_blocked(seconds_since(started));
}

void Diloco::on_group_thread(comm::Group& group, const std::function<void()>& job) {
  if (!background_) return job();
  auto done = background_->submit([&job] {
    const comm::BackgroundWaits background;
    job();
  });
  wait_for_background(group, [&] { done.get(); });
}

void Diloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  std::vector<torch::Tensor> globals;
  for (const OuterNesterov& outer : outer_) globals.push_back(outer.global());
  with_values(fragments_, globals, evaluate);
}

void Diloco::add_log_fields(nlohmann::json& record) { membership_.add_log_fields(record); }

}  // namespace loco
