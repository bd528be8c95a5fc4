// Learning-rate schedules (optim.schedule). Step s counts optimizer steps from 0; the rate returned
// is the one used for step s. Warmup is linear: lr·(s+1)/warmup for s < warmup, so the first step
// already moves. After warmup, with progress p = (s − warmup)/(steps − warmup) in [0, 1]:
//   cosine:   min + (peak − min)·(1 + cos(π·p))/2
//   linear:   min + (peak − min)·(1 − p)
//   constant: peak
//   wsd:      peak until the last decay_fraction of the steps, then linear to min
// with min = peak·min_lr_ratio.
#pragma once

#include <cstdint>

#include "loco/config/run_config.h"

namespace loco {

double learning_rate(const OptimConfig& optim, std::int64_t step, std::int64_t total_steps);

}  // namespace loco
