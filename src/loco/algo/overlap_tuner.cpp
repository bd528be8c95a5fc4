#include "loco/algo/overlap_tuner.h"

#include <fmt/format.h>

#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"

namespace loco {

namespace {
double steady_seconds() { return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count(); }
}  // namespace

OverlapTuner::OverlapTuner(std::int64_t most, bool emulated, const EmulatedClock& clock, bool announce)
    : most_(most), emulated_(emulated), clock_(clock), announce_(announce) {}

double OverlapTuner::now() const { return emulated_ ? clock_.now() : steady_seconds(); }

void OverlapTuner::step_begins() {
  if (last_step_end_) steps_.record(now() - *last_step_end_);
}

void OverlapTuner::step_ends() { last_step_end_ = now(); }

void OverlapTuner::adopt(const std::string& name, const ExchangeTiming& timing, const std::string& source,
                         std::int64_t& tau) {
  const std::int64_t next = next_overlap(timing, tau, most_);
  if (next == tau) return;
  if (announce_) {
    loco::print_unchecked(stderr, "streaming: {}: tau {} -> {} ({}exchange {:.3f} s{}, slowest inner step {:.3f} s)\n",
                          name, tau, next, source.empty() ? "" : "predicted ", timing.exchange_s,
                          source.empty() ? "" : " from " + source, timing.step_s);
  }
  tau = next;
}

void OverlapTuner::adopt_measured(const std::string& name, std::int64_t bytes, const ExchangeTiming& timing,
                                  std::int64_t& tau) {
  adopt(name, timing, "", tau);
  last_measured_ = Measured{name, {timing.exchange_s, bytes}};
  if (timing.step_s > 0) agreed_step_s_ = timing.step_s;
}

void OverlapTuner::predict_first(const std::string& name, std::int64_t bytes, int replicas, const comm::LinkModel& link,
                                 const std::function<double(double)>& agree, std::int64_t& tau) {
  const auto measured = last_measured_ ? std::optional(last_measured_->exchange) : std::nullopt;
  const auto exchange_s = predicted_exchange_seconds(bytes, replicas, measured, link);
  if (!exchange_s) return;
  if (!agreed_step_s_) {
    const double agreed = agree(steps_.median());
    if (agreed > 0) agreed_step_s_ = agreed;
  }
  if (!agreed_step_s_) return;
  adopt(name, {*exchange_s, *agreed_step_s_},
        last_measured_ ? last_measured_->fragment + "'s exchange" : "the configured link", tau);
}

}  // namespace loco
