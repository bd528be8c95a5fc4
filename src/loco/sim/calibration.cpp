#include "loco/sim/calibration.h"

namespace loco::sim {

namespace {

// The one calibrated quantity: values a full synchronisation exchanges. The table's own
// data-parallel row pins the bits per step below the nominal 1e9 × 16 (docs/simulate.md).
constexpr double kCalibratedParams = 0.91e9;
// FP4 E3M0 codes plus one fp32 absmax scale per block of 128 values: 4 + 32/128 bits.
constexpr double kFp4BitsWithScales = 4.25;

AlgorithmSpec algorithm(Algorithm kind, int fragments, int overlap_steps, double bits) {
  AlgorithmSpec spec;
  spec.kind = kind;
  spec.inner_steps = kind == Algorithm::kDataParallel ? 1 : 100;
  spec.fragments = fragments;
  spec.overlap_steps = overlap_steps;
  spec.bits = bits;
  return spec;
}

}  // namespace

Scenario calibration_scenario() {
  Scenario s;
  s.params = kCalibratedParams;
  s.layers = 24;
  s.step_time_s = 0.1;
  s.workers = 2;
  s.replicas = 2;
  s.bits = 16;
  s.inter = {0, 0};
  s.intra = {400e9, 0};  // unused: one worker per replica
  return s;
}

std::vector<CalibrationRow> calibration_rows() {
  const int fragments = 8;  // 24 layers in fragments of 3
  return {
      {"data parallel", algorithm(Algorithm::kDataParallel, 1, 0, 0), {86.8, 152.6, 184.2, 222.3, 569.0}},
      {"DiLoCo", algorithm(Algorithm::kDiLoCo, 1, 0, 0), {1.4, 6.2, 13.3, 23.3, 86.8}},
      {"Streaming", algorithm(Algorithm::kStreaming, fragments, 0, 0), {1.4, 5.2, 9.1, 16.0, 28.1}},
      {"+ overlap", algorithm(Algorithm::kStreaming, fragments, 1, 0), {1.4, 4.3, 6.2, 9.1, 11.0}},
      {"+ overlap + FP4",
       algorithm(Algorithm::kStreaming, fragments, 1, kFp4BitsWithScales),
       {0.4, 0.9, 1.7, 2.0, 3.0}},
  };
}

}  // namespace loco::sim
