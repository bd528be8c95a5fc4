// A Kineto trace of a few training steps, asked for through the environment (no config key: it is a
// diagnostic, not part of a run's definition). bench/trace_summary.py reads the trace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace loco {

// LOCO_PROFILE=FILE writes a Chrome trace (CPU ops and, on CUDA, kernels) of the steps
// [LOCO_PROFILE_START, LOCO_PROFILE_START + LOCO_PROFILE_STEPS) (1-based step numbers; defaults 6 and 2)
// to FILE. Open it in chrome://tracing or Perfetto, or summarise it with bench/trace_summary.py.
class StepProfiler {
 public:
  // Null when LOCO_PROFILE is unset, or (with a note) when the window misses the run's steps `done`+1 to `steps`;
  // a window partly in them traces that part. ConfigError when the variables are malformed or this libtorch
  // cannot save a trace (tried at once, with an empty one written beside the file and removed).
  static std::unique_ptr<StepProfiler> from_environment(bool cuda, std::int64_t done, std::int64_t steps);

  void before_step(std::int64_t step);  // `step`: the 1-based number of the step about to run
  void after_step(std::int64_t step);   // `step`: the 1-based number of the step just finished
  ~StepProfiler();

 private:
  StepProfiler(std::string path, std::int64_t first, std::int64_t count, bool cuda);
  // Stops the profiler and saves its trace to `file`; ConfigError saying `refusal` and why when it cannot.
  void save_trace(const std::string& file, const std::string& refusal);
  std::string path_;
  std::int64_t first_, last_;
  bool cuda_;
  bool active_ = false;
};

}  // namespace loco
