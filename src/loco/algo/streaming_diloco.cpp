#include "loco/algo/streaming_diloco.h"

#include <fmt/format.h>

#include "loco/algo/adversary.h"
#include "loco/algo/outer_state_io.h"
#include "loco/algo/pseudo_gradient_average.h"
#include "loco/algo/replica_hash.h"
#include "loco/algo/replica_mean.h"
#include "loco/util/error.h"
#include "loco/util/seconds_since.h"

namespace loco {

namespace {
double steady_seconds() { return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count(); }
}  // namespace

StreamingDiloco::StreamingDiloco(const StreamingConfig& config, const ExchangeConfig& exchange,
                                 const ReplicaContext& context, bool simulated_replicas)
    : config_(config),
      exchange_(exchange),
      context_(context),
      link_(*context.group, *context.clock),
      codec_(exchange_codec(exchange.codec, exchange.block_size)),
      emulated_clock_(simulated_replicas && context.group->options().link.emulates_anything()),
      background_(std::make_unique<SerialWorker>()) {}

std::string StreamingDiloco::describe() const {
  const bool overlapped_diloco =
      config_.fragments == 1 && !config_.embeddings_fragment && (config_.overlap > 0 || config_.overlap_auto);
  const std::string tau =
      config_.overlap_auto ? fmt::format("auto (from {})", config_.overlap) : std::to_string(config_.overlap);
  return fmt::format(
             "streaming{}: nesterov(pytorch) eta={} mu={} H={} fragments={} ({}{}) tau={} alpha={} codec={}{} M={}",
             overlapped_diloco ? " (overlapped DiLoCo)" : "", config_.outer_lr, config_.outer_momentum,
             config_.sync_every, fragments_.size(), config_.assignment,
             config_.embeddings_fragment ? ", embeddings separate" : "", tau, config_.mix, exchange_.codec,
             describe_aggregation(exchange_.aggregation), context_.group->size()) +
         describe_adversary(exchange_.adversary);
}

void StreamingDiloco::attach(Llama& model, const FlatParameters& parameters) {
  fragments_ = block_fragments(parameters, static_cast<std::int64_t>(model->model->layers->size()), config_.fragments,
                               config_.assignment == "strided", config_.embeddings_fragment);
  for (const auto& f : fragments_) outer_.emplace_back(f.read(), config_.outer_lr, config_.outer_momentum);
  outer_steps_.assign(fragments_.size(), 0);
  overlap_.assign(fragments_.size(), config_.overlap);
}

bool StreamingDiloco::sends_at(std::size_t fragment, std::int64_t step) const {
  const std::int64_t h = config_.sync_every;
  const auto offset = static_cast<std::int64_t>(fragment) * (h / static_cast<std::int64_t>(fragments_.size()));
  return step > 0 && step % h == offset;
}

void StreamingDiloco::wait_for_background(const std::function<void()>& wait) const {
  const auto started = SteadyClock::now();
  wait();
  context_.group->record_blocked(seconds_since(started));
}

double StreamingDiloco::now() const { return emulated_clock_ ? context_.clock->now() : steady_seconds(); }

void StreamingDiloco::send(std::size_t fragment, std::int64_t step, std::int64_t apply_after) {
  Exchange x{fragment,
             apply_after,
             outer_[fragment].pseudo_gradient(fragments_[fragment].read()),
             {},
             std::make_shared<double>(0),
             link_.start_time(),
             std::make_shared<double>(0),
             /*mix=*/apply_after > step,
             std::make_shared<ExchangeTiming>()};
  comm::Group& group = *context_.group;
  corrupt_pseudo_gradient(exchange_.adversary, x.delta, group.rank(), step, context_.seed);
  const bool tuning = config_.overlap_auto;
  // Note "overlap-auto": E runs from here, on the clock now() reads.
  const double sent_at = now();
  const double step_s = tuning ? steps_.take_median() : 0;
  // The job is the group's only user while it runs (SerialWorker), as charged_seconds needs.
  x.done = background_->submit([&group, delta = x.delta, codec = codec_.get(), aggregation = exchange_.aggregation,
                                emulated = x.emulated_s, contributed = x.contributed, timing = x.timing, tuning,
                                sent_at, step_s, emulated_clock = emulated_clock_, started_at = x.started_at,
                                what = fmt::format("streaming: the outer step of {} sent after step {}",
                                                   fragments_[fragment].name(), step)]() mutable {
    const comm::BackgroundWaits background;  // training goes on meanwhile: not its wait
    *emulated = LinkTimeline::charged_seconds(group, [&] {
      *contributed = average_pseudo_gradients(group, delta, codec, aggregation, std::nullopt, what).weight;
    });
    if (!tuning) return;
    // On the emulated link the average is ready when the link has carried it (LinkTimeline).
    const double ready_at = emulated_clock ? started_at + *emulated : steady_seconds();
    *emulated += LinkTimeline::charged_seconds(group, [&] {
      *timing = timing_across(group, {ready_at - sent_at, step_s});
    });
  });
  in_flight_.push_back(std::move(x));
}

std::int64_t StreamingDiloco::exchange_bytes(std::size_t fragment) const {
  const auto count = fragments_[fragment].numel();
  return codec_ ? static_cast<std::int64_t>(codec_->encoded_bytes(static_cast<std::size_t>(count)))
                : count * static_cast<std::int64_t>(sizeof(float));
}

void StreamingDiloco::adopt_overlap(std::size_t fragment, const ExchangeTiming& timing, const std::string& source) {
  std::int64_t& overlap = overlap_[fragment];
  const std::int64_t tau = next_overlap(timing, overlap, config_.sync_every - 1);
  if (tau == overlap) return;
  if (context_.group->rank() == 0) {
    fmt::print(stderr, "streaming: {}: tau {} -> {} ({}exchange {:.3f} s{}, slowest inner step {:.3f} s)\n",
               fragments_[fragment].name(), overlap, tau, source.empty() ? "" : "predicted ", timing.exchange_s,
               source.empty() ? "" : " from " + source, timing.step_s);
  }
  overlap = tau;
}

void StreamingDiloco::adopt_measured_overlap(std::size_t fragment, const ExchangeTiming& timing) {
  adopt_overlap(fragment, timing, "");
  last_measured_ = FragmentExchange{fragment, {timing.exchange_s, exchange_bytes(fragment)}};
  if (timing.step_s > 0) agreed_step_s_ = timing.step_s;
}

void StreamingDiloco::predict_first_overlap(std::size_t fragment) {
  if (!config_.overlap_auto || outer_steps_[fragment] > 0) return;
  const comm::Group& group = *context_.group;
  const auto measured = last_measured_ ? std::optional(last_measured_->exchange) : std::nullopt;
  const auto exchange_s =
      predicted_exchange_seconds(exchange_bytes(fragment), group.size(), measured, group.options().link);
  if (!exchange_s) return;
  const double step_s = agreed_step_seconds();
  if (!(step_s > 0)) return;
  adopt_overlap(fragment, {*exchange_s, step_s},
                last_measured_ ? fragments_[last_measured_->fragment].name() + "'s exchange" : "the configured link");
}

double StreamingDiloco::agreed_step_seconds() {
  if (agreed_step_s_) return *agreed_step_s_;
  // Through the background thread: it owns the group while exchanges may be queued (none are, in a run
  // that has applied none yet, unless it resumed with some in flight).
  comm::Group& group = *context_.group;
  double agreed = 0;
  auto gathered = background_->submit([&group, &agreed, mine = steps_.median()] {
    const comm::BackgroundWaits background;
    agreed = timing_across(group, {0, mine}).step_s;
  });
  wait_for_background([&] { gathered.get(); });
  if (agreed > 0) agreed_step_s_ = agreed;
  return agreed;
}

void StreamingDiloco::apply_oldest() {
  Exchange x = std::move(in_flight_.front());
  in_flight_.pop_front();
  wait_for_background([&] { x.done.get(); });
  link_.occupy(x.started_at, *x.emulated_s);
  link_.wait();
  if (config_.overlap_auto) adopt_measured_overlap(x.fragment, *x.timing);
  OuterNesterov& outer = outer_[x.fragment];
  if (*x.contributed > 0) outer.step(x.delta);
  ParameterFragment& fragment = fragments_[x.fragment];
  if (x.mix) {
    fragment.write(fragment.read().mul_(config_.mix).add_(outer.global(), 1 - config_.mix));
  } else {
    fragment.write(outer.global());
  }
  ++outer_steps_[x.fragment];
  if (exchange_.check_sync) {
    // Through the background thread too: it owns the group while exchanges may be queued.
    comm::Group& group = *context_.group;
    const std::string what =
        fmt::format("global parameters of {} after its outer step {}", fragment.name(), outer_steps_[x.fragment]);
    auto checked = background_->submit([&group, global = outer.global(), what] {
      const comm::BackgroundWaits background;
      require_identical_across_replicas(group, global, what);
    });
    wait_for_background([&] { checked.get(); });
  }
}

// Note "overlap-auto": a step's duration runs from the end of the previous after_step to the start of
// this one, so the waits for exchanges below are not counted as compute.
void StreamingDiloco::after_step(std::int64_t step) {
  if (!config_.overlap_auto) return exchange_after_step(step);
  const double started = now();
  if (last_step_end_) steps_.record(started - *last_step_end_);
  exchange_after_step(step);
  last_step_end_ = now();
}

void StreamingDiloco::exchange_after_step(std::int64_t step) {
  std::vector<bool> sent_now(fragments_.size(), false);
  for (std::size_t p = 0; p < fragments_.size(); ++p) {
    if (sends_at(p, step)) {
      predict_first_overlap(p);
      send(p, step, step + overlap_[p]);
      sent_now[p] = true;
    }
  }
  while (!in_flight_.empty() && in_flight_.front().apply_after <= step) apply_oldest();
  if (step != context_.total_steps) return;
  while (!in_flight_.empty()) apply_oldest();
  for (std::size_t p = 0; p < fragments_.size(); ++p) {
    if (sent_now[p]) continue;
    send(p, step, step);
    apply_oldest();
  }
}

void StreamingDiloco::with_evaluation_parameters(const std::function<void()>& evaluate) {
  std::vector<torch::Tensor> globals;
  for (const OuterNesterov& outer : outer_) globals.push_back(outer.global());
  with_values(fragments_, globals, evaluate);
}

// A checkpoint taken while exchanges are in flight saves their averaged Δ (waiting for them does not
// change any value), so that the resumed run applies them at the same step as the uninterrupted one.
NamedTensors StreamingDiloco::state_tensors() const {
  NamedTensors out;
  for (std::size_t p = 0; p < fragments_.size(); ++p) {
    out.emplace_back(fmt::format("outer/{}/global", p), outer_[p].global());
    out.emplace_back(fmt::format("outer/{}/momentum", p), outer_[p].momentum_buffer());
  }
  for (std::size_t i = 0; i < in_flight_.size(); ++i) {
    wait_for_background([&] { in_flight_[i].done.wait(); });
    out.emplace_back(fmt::format("in_flight/{}/delta", i), in_flight_[i].delta);
  }
  return out;
}

nlohmann::json StreamingDiloco::state_json() const {
  nlohmann::json in_flight = nlohmann::json::array();
  for (const auto& x : in_flight_) {
    in_flight.push_back({{"fragment", x.fragment},
                         {"apply_after", x.apply_after},
                         {"emulated_s", *x.emulated_s},
                         {"started_at", x.started_at},
                         {"contributed", *x.contributed},
                         {"mix", x.mix},
                         {"exchange_s", x.timing->exchange_s},
                         {"step_s", x.timing->step_s}});
  }
  return {{"outer_steps", outer_steps_},
          {"in_flight", in_flight},
          {"link_free_at", link_.free_at()},
          {"overlap", overlap_}};
}

void StreamingDiloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  for (std::size_t p = 0; p < fragments_.size(); ++p) {
    outer_[p].load(saved_outer_tensor(tensors, fmt::format("outer/{}/global", p), outer_[p].global()),
                   saved_outer_tensor(tensors, fmt::format("outer/{}/momentum", p), outer_[p].momentum_buffer()));
  }
  if (!json.contains("outer_steps") || json.at("outer_steps").size() != fragments_.size()) {
    throw CheckpointError(
        fmt::format("the checkpoint next to {} has no outer step counts for {} fragments; it was "
                    "written with other streaming settings. Resume with the settings it was "
                    "trained with",
                    tensors.source.string(), fragments_.size()));
  }
  outer_steps_ = json.at("outer_steps").get<std::vector<std::int64_t>>();
  link_.restore(json.value("link_free_at", 0.0));
  const nlohmann::json overlap = json.value("overlap", nlohmann::json());
  if (overlap.is_array() && overlap.size() == fragments_.size()) overlap_ = overlap.get<std::vector<std::int64_t>>();
  const nlohmann::json in_flight = json.value("in_flight", nlohmann::json::array());
  for (std::size_t i = 0; i < in_flight.size(); ++i) {
    const auto fragment = in_flight[i].at("fragment").get<std::size_t>();
    LOCO_CHECK(fragment < fragments_.size(), "in-flight exchange of fragment {}", fragment);
    std::promise<void> finished;
    finished.set_value();
    in_flight_.push_back(
        Exchange{fragment, in_flight[i].at("apply_after").get<std::int64_t>(),
                 saved_outer_tensor(tensors, fmt::format("in_flight/{}/delta", i), outer_[fragment].global()).clone(),
                 finished.get_future(), std::make_shared<double>(in_flight[i].at("emulated_s").get<double>()),
                 in_flight[i].at("started_at").get<double>(),
                 // Checkpoints written before robust aggregation always applied the average; before τ auto,
                 // only exchanges with τ > 0 (mixed) could be in flight.
                 std::make_shared<double>(in_flight[i].value("contributed", 1.0)), in_flight[i].value("mix", true),
                 std::make_shared<ExchangeTiming>(
                     ExchangeTiming{in_flight[i].value("exchange_s", 0.0), in_flight[i].value("step_s", 0.0)})});
  }
}

}  // namespace loco
