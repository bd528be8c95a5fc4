// The DiLoCo family's part of a checkpoint (algo/diloco.h): every fragment's θ_g and b (and SparseLoCo's
// accumulator e, "outer/accumulator"), the outer step counts and the schedule's position, and the exchanges not yet applied. DiLoCo and Local SGD name the
// whole model's state "outer/global", "outer/momentum"; Streaming DiLoCo "outer/P/global", "outer/P/momentum".
//
// An exchange in flight is saved in one of two ways, as the membership allows (train/membership.h):
//   in_flight   its result (a fixed membership: the replicas that took part are all there on resume),
//               waited for; the resumed run applies it at the same step as the uninterrupted one;
//   to_retry    this replica's own Δ (a membership that may abort: the result counts only once committed),
//               exchanged again with whoever takes part when the run goes on.
#include <fmt/format.h>

#include "loco/algo/diloco.h"
#include "loco/algo/outer_state_io.h"
#include "loco/util/error.h"

namespace loco {

std::string Diloco::fragment_prefix(std::size_t fragment) const {
  return settings_.streaming ? fmt::format("outer/{}/", fragment) : "outer/";
}

NamedTensors Diloco::outer_state(const std::vector<std::optional<OuterNesterov>>& candidates) const {
  NamedTensors out;
  for (std::size_t p = 0; p < outer_.size(); ++p) {
    const OuterNesterov& outer = p < candidates.size() && candidates[p] ? *candidates[p] : outer_[p];
    out.emplace_back(fragment_prefix(p) + "global", outer.global());
    out.emplace_back(fragment_prefix(p) + "momentum", outer.momentum_buffer());
  }
  return out;
}

std::vector<const Diloco::Exchange*> Diloco::uncommitted() const {
  std::vector<const Exchange*> out;
  for (const Exchange& x : in_flight_) out.push_back(&x);
  for (const Exchange& x : to_retry_) out.push_back(&x);
  return out;
}

NamedTensors Diloco::state_tensors() const {
  NamedTensors out = outer_state();
  // Each replica's own, so outside outer_state(), which the members compare.
  for (std::size_t p = 0; p < accumulators_.size(); ++p)
    out.emplace_back(fragment_prefix(p) + "accumulator", accumulators_[p]);
  if (membership_.may_abort()) {
    const auto pending = uncommitted();
    for (std::size_t i = 0; i < pending.size(); ++i)
      out.emplace_back(fmt::format("to_retry/{}/delta", i), pending[i]->delta);
    return out;
  }
  // Waiting for an exchange does not change any value.
  for (std::size_t i = 0; i < in_flight_.size(); ++i) {
    wait_for_background(*in_flight_[i].who.group, [&] { in_flight_[i].done.wait(); });
    out.emplace_back(fmt::format("in_flight/{}/delta", i), in_flight_[i].mean);
  }
  return out;
}

nlohmann::json Diloco::state_json() const {
  nlohmann::json json;
  if (settings_.streaming) {
    nlohmann::json in_flight = nlohmann::json::array();
    for (const Exchange& x : in_flight_) {
      if (membership_.may_abort()) break;  // saved as to_retry below
      in_flight.push_back({{"fragment", x.fragment},
                           {"apply_after", x.apply_after},
                           {"emulated_s", x.result->emulated_s},
                           {"started_at", x.started_at},
                           {"contributed", x.result->averaged.weight},
                           {"mix", x.mix},
                           {"exchange_s", x.result->timing.exchange_s},
                           {"step_s", x.result->timing.step_s}});
    }
    json = {{"outer_steps", outer_steps_},
            {"in_flight", in_flight},
            {"link_free_at", link_.free_at()},
            {"overlap", overlap_}};
  } else {
    json = {{"outer_steps", outer_steps_[0]},
            {"next_sync", points_.saved_next()},
            {"tokens_since_sync", tokens_since_sync_}};
  }
  if (membership_.may_abort()) {
    nlohmann::json to_retry = nlohmann::json::array();
    for (const Exchange* x : uncommitted()) {
      to_retry.push_back({{"fragment", x->fragment},
                          {"point", x->point},
                          {"apply_after", x->apply_after},
                          {"mix", x->mix},
                          {"weight", x->weight.value_or(1.0)}});
    }
    if (!to_retry.empty()) json["to_retry"] = to_retry;
  }
  membership_.save_to(json);
  return json;
}

// Streaming: the outer steps per fragment, their overlaps, which fragments are in flight until when, and the
// weight each of those averaged (the same on every replica: the average is everyone's); not the exchanges'
// timings, each replica's own. DiLoCo: the outer steps and the next synchronisation.
nlohmann::json Diloco::schedule_of(const nlohmann::json& saved) const {
  const auto field = [&saved](const char* key) { return saved.value(key, nlohmann::json()); };
  if (!settings_.streaming) return {{"outer_steps", field("outer_steps")}, {"next_sync", field("next_sync")}};
  nlohmann::json in_flight = nlohmann::json::array();
  for (const auto& x : saved.value("in_flight", nlohmann::json::array())) {
    in_flight.push_back({x.value("fragment", nlohmann::json()), x.value("apply_after", nlohmann::json()),
                         x.value("mix", nlohmann::json()), x.value("contributed", nlohmann::json())});
  }
  return {{"outer_steps", field("outer_steps")}, {"overlap", field("overlap")}, {"in_flight", in_flight}};
}

// An exchange's fragment and steps as saved: one of this run's fragments, and no negative step, or the state
// was edited.
std::size_t Diloco::saved_fragment(const nlohmann::json& saved, const SafetensorsContent& tensors) const {
  const auto fragment = saved.at("fragment").get<std::int64_t>();
  if (fragment < 0 || static_cast<std::size_t>(fragment) >= fragments_.size()) {
    throw CheckpointError(fmt::format("the checkpoint next to {} holds an exchange of fragment {}, but the run has {} "
                                      "fragments; it was edited or corrupted. Resume from another checkpoint",
                                      tensors.source.string(), fragment, fragments_.size()));
  }
  return static_cast<std::size_t>(fragment);
}

std::int64_t Diloco::saved_step(const nlohmann::json& saved, const char* key, const SafetensorsContent& tensors) const {
  const auto step = saved.at(key).get<std::int64_t>();
  if (step < 0) {
    throw CheckpointError(fmt::format("the checkpoint next to {} holds an exchange whose {} is step {}; it was edited "
                                      "or corrupted. Resume from another checkpoint",
                                      tensors.source.string(), key, step));
  }
  return step;
}

double Diloco::saved_weight(const nlohmann::json& saved, const char* key, const SafetensorsContent& tensors,
                            std::optional<double> fallback) const {
  const double weight = fallback && !saved.contains(key) ? *fallback : saved.at(key).get<double>();
  if (weight < 0) {
    throw CheckpointError(fmt::format("the checkpoint next to {} holds an exchange whose {} is {}, below 0; it was "
                                      "edited or corrupted. Resume from another checkpoint",
                                      tensors.source.string(), key, weight));
  }
  return weight;
}

void Diloco::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  // A heal replaces the state at a synchronisation, never while an exchange runs.
  for (const Exchange& x : in_flight_) {
    LOCO_CHECK(x.done.wait_for(std::chrono::seconds(0)) == std::future_status::ready,
               "a state was loaded while an exchange was in flight");
  }
  in_flight_.clear();
  to_retry_.clear();
  for (std::size_t p = 0; p < outer_.size(); ++p) {
    outer_[p].load(saved_outer_tensor(tensors, fragment_prefix(p) + "global", outer_[p].global()),
                   saved_outer_tensor(tensors, fragment_prefix(p) + "momentum", outer_[p].momentum_buffer()));
  }
  for (std::size_t p = 0; p < accumulators_.size(); ++p)
    accumulators_[p] =
        saved_outer_tensor(tensors, fragment_prefix(p) + "accumulator", accumulators_[p]).to(torch::kFloat32).clone();
  if (settings_.streaming) {
    if (!json.contains("outer_steps") || !json.at("outer_steps").is_array() ||
        json.at("outer_steps").size() != fragments_.size()) {
      throw CheckpointError(
          fmt::format("the checkpoint next to {} has no outer step counts for {} fragments; it was written with "
                      "other streaming settings. Resume with the settings it was trained with",
                      tensors.source.string(), fragments_.size()));
    }
    outer_steps_ = json.at("outer_steps").get<std::vector<std::int64_t>>();
    for (const std::int64_t count : outer_steps_) {
      if (count < 0) {
        throw CheckpointError(fmt::format("the checkpoint next to {} counts {} outer steps of a fragment; it was edited "
                                          "or corrupted. Resume from another checkpoint",
                                          tensors.source.string(), count));
      }
    }
    link_.restore(json.value("link_free_at", 0.0));
    // The overlaps the tuner chose (streaming.overlap_auto) go on; a fixed streaming.overlap is the config's,
    // changed at a resume as any other key (before: the checkpoint's went on, while the run said and recorded the
    // new one). Exchanges already in flight land at the steps they were given.
    const nlohmann::json overlap = json.value("overlap", nlohmann::json());
    const std::vector<std::int64_t> saved_overlap =
        overlap.is_array() && overlap.size() == fragments_.size() ? overlap.get<std::vector<std::int64_t>>() : overlap_;
    if (settings_.overlap_auto) overlap_ = saved_overlap;
    for (const std::int64_t tau : saved_overlap) {
      if (tau < 0) {  // the replicas would exchange in different orders
        throw CheckpointError(fmt::format("the checkpoint next to {} overlaps a fragment's exchange by {} steps; it was "
                                          "edited or corrupted. Resume from another checkpoint",
                                          tensors.source.string(), tau));
      }
    }
    const nlohmann::json in_flight = json.value("in_flight", nlohmann::json::array());
    for (std::size_t i = 0; i < in_flight.size(); ++i) {
      const nlohmann::json& saved = in_flight[i];
      Exchange x;
      x.sync = ++syncs_begun_;
      x.fragment = saved_fragment(saved, tensors);
      x.apply_after = saved_step(saved, "apply_after", tensors);
      x.point = x.apply_after;  // not saved: only a retry reads it, and a fixed membership never retries
      // Before τ auto, only exchanges with τ > 0 (mixed) could be in flight.
      x.mix = saved.value("mix", true);
      x.who = {context_.group, x.apply_after, {}, false};  // a fixed membership's: every replica
      x.mean = saved_outer_tensor(tensors, fmt::format("in_flight/{}/delta", i), outer_[x.fragment].global()).clone();
      std::promise<void> arrived;
      arrived.set_value();
      x.done = arrived.get_future();
      // Checkpoints written before robust aggregation always applied the average.
      x.result->averaged.weight = saved_weight(saved, "contributed", tensors, 1.0);
      x.result->emulated_s = saved.at("emulated_s").get<double>();
      x.result->timing = {saved.value("exchange_s", 0.0), saved.value("step_s", 0.0)};
      x.started_at = saved.at("started_at").get<double>();
      x.on_link = false;
      in_flight_.push_back(std::move(x));
    }
  } else {
    outer_steps_[0] = saved_outer_integer(json, "outer_steps", tensors);
    points_.restore_next(saved_outer_integer(json, "next_sync", tensors));
    tokens_since_sync_ = saved_outer_integer(json, "tokens_since_sync", tensors);
  }
  const nlohmann::json to_retry = json.value("to_retry", nlohmann::json::array());
  const std::uint64_t sync = ++syncs_begun_;
  for (std::size_t i = 0; i < to_retry.size(); ++i) {
    const nlohmann::json& saved = to_retry[i];
    Exchange& x = to_retry_.emplace_back();
    x.sync = sync;
    x.fragment = saved_fragment(saved, tensors);
    x.point = saved_step(saved, "point", tensors);
    x.apply_after = saved_step(saved, "apply_after", tensors);
    x.mix = saved.at("mix").get<bool>();
    x.weight = saved_weight(saved, "weight", tensors);
    x.delta = saved_outer_tensor(tensors, fmt::format("to_retry/{}/delta", i), outer_[x.fragment].global()).clone();
  }
  membership_.load_from(json, tensors);
}

}  // namespace loco
