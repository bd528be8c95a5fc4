// Note "overlap-auto" (overlap_auto.h) as the DiLoCo family keeps it across a run: the inner steps'
// durations since the last send, the exchange measured last (any fragment) and the step time the replicas
// agreed on, and the τ each fragment takes up from them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "loco/algo/overlap_auto.h"
#include "loco/train/emulated_clock.h"

namespace loco {

class OverlapTuner {
 public:
  // `most`: the largest τ (streaming.sync_every − 1). `emulated`: measure on `clock` (simulated replicas
  // behind an emulated link, where their link time exists), else wall time. `announce`: this replica logs
  // the τ it takes up (one replica of a run is enough: all take up the same).
  OverlapTuner(std::int64_t most, bool emulated, const EmulatedClock& clock, bool announce);

  // Seconds on the clock τ auto measures with.
  double now() const;
  // Whether that clock is the emulated one.
  bool emulated() const { return emulated_; }
  // Around a strategy's after_step: a step's duration runs from the end of one after_step to the start of
  // the next, so the waits for exchanges are not counted as compute.
  void step_begins();
  void step_ends();
  // s at a send: the median inner step since the last send (and forgets those steps).
  double take_step_seconds() { return steps_.take_median(); }

  // `tau` of the fragment `name` takes up what `timing` of one of its exchanges (of `bytes` bytes) calls for,
  // and the exchange is remembered for predictions.
  void adopt_measured(const std::string& name, std::int64_t bytes, const ExchangeTiming& timing, std::int64_t& tau);
  // Before fragment `name` first sends its `bytes` bytes to `replicas` replicas over `link`: `tau` from a
  // predicted E. `agree(s)` returns the largest s across the replicas (a collective).
  void predict_first(const std::string& name, std::int64_t bytes, int replicas, const comm::LinkModel& link,
                     const std::function<double(double)>& agree, std::int64_t& tau);

 private:
  // `tau` of fragment `name` takes up `timing`; `source` names where a predicted E came from ("": measured).
  void adopt(const std::string& name, const ExchangeTiming& timing, const std::string& source, std::int64_t& tau);

  std::int64_t most_;
  bool emulated_;
  const EmulatedClock& clock_;
  bool announce_;
  StepDurations steps_;  // since the last send
  struct Measured {
    std::string fragment;
    MeasuredExchange exchange;
  };
  std::optional<Measured> last_measured_;  // the last exchange measured (any fragment)
  std::optional<double> agreed_step_s_;    // s the replicas last agreed on
  std::optional<double> last_step_end_;    // now() when the last after_step returned
};

}  // namespace loco
