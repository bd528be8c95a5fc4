#include "loco/comm/link/link_fit.h"

#include <cmath>

namespace loco::comm {

void LinkFit::add(const LinkSample& sample) {
  if (!(sample.bytes > 0) || !(sample.seconds > 0) || !std::isfinite(sample.seconds)) return;
  // Note "link-stall".
  if (estimate_) {
    const double predicted = 8 * sample.bytes / estimate_->bandwidth_bps + sample.rounds * estimate_->latency_s;
    if (sample.seconds > kStallFactor * predicted) {
      stalls_.push_back(sample);
      if (stalls_.size() < kStallsBeforeChange) return;
      for (const LinkSample& slow : stalls_) take(slow);
      stalls_.clear();
      refit();
      return;
    }
  }
  stalls_.clear();
  take(sample);
  refit();
}

void LinkFit::take(const LinkSample& sample) {
  samples_.push_back(sample);
  if (samples_.size() > kSamples) samples_.pop_front();
}

// The 2×2 normal equations of seconds ≈ bits·a + rounds·L (a = 1/B).
void LinkFit::refit() {
  double xx = 0, xk = 0, kk = 0, xt = 0, kt = 0;
  for (const auto& s : samples_) {
    const double x = 8 * s.bytes;
    xx += x * x;
    xk += x * s.rounds;
    kk += s.rounds * s.rounds;
    xt += x * s.seconds;
    kt += s.rounds * s.seconds;
  }
  const double det = xx * kk - xk * xk;
  // Relative to its terms: below this the samples are (nearly) proportional and say nothing of L.
  if (det > 1e-6 * xx * kk) {
    const double a = (kk * xt - xk * kt) / det;
    const double latency = (xx * kt - xk * xt) / det;
    if (a > 0 && latency >= 0) {
      estimate_ = LinkSpec{1 / a, latency};
      return;
    }
  }
  estimate_ = LinkSpec{xx / xt, 0};
}

}  // namespace loco::comm
