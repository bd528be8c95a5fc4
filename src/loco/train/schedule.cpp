#include "loco/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace loco {

double learning_rate(const OptimConfig& o, std::int64_t step, std::int64_t total_steps) {
  const double peak = o.lr;
  const double floor = o.lr * o.min_lr_ratio;
  if (step < o.warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  if (o.schedule == "constant") return peak;

  auto fraction = [](std::int64_t done, std::int64_t span) {
    return span <= 0 ? 1.0 : std::clamp(static_cast<double>(done) / static_cast<double>(span), 0.0, 1.0);
  };
  if (o.schedule == "wsd") {
    const auto decay_steps = static_cast<std::int64_t>(std::llround(o.decay_fraction * total_steps));
    const std::int64_t decay_start = std::max(o.warmup_steps, total_steps - decay_steps);
    if (step < decay_start) return peak;
    return floor + (peak - floor) * (1.0 - fraction(step - decay_start, total_steps - 1 - decay_start));
  }
  const double p = fraction(step - o.warmup_steps, total_steps - 1 - o.warmup_steps);
  if (o.schedule == "linear") return floor + (peak - floor) * (1.0 - p);
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * p));  // cosine
}

}  // namespace loco
