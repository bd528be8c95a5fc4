#include "loco/train/step_profiler.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"

namespace loco {

namespace {

namespace kineto = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

// A run has at most 2^40 steps (a checkpoint's bound), so a window beyond it would never close.
constexpr std::int64_t kMostStep = std::int64_t{1} << 40;

std::int64_t env_int(const char* name, std::int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(value, &end, 10);
  if (*end != '\0' || errno != 0 || parsed < 1 || parsed > kMostStep) {
    throw ConfigError(fmt::format("{}={} must be a whole number of steps from 1 to {}", name, value, kMostStep));
  }
  return parsed;
}

std::set<impl::ActivityType> activities(bool cuda) {
  std::set<impl::ActivityType> out{impl::ActivityType::CPU};
  if (cuda) out.insert(impl::ActivityType::CUDA);
  return out;
}

}  // namespace

std::unique_ptr<StepProfiler> StepProfiler::from_environment(bool cuda, std::int64_t done, std::int64_t steps) {
  const char* path = std::getenv("LOCO_PROFILE");
  if (path == nullptr || *path == '\0') return nullptr;
  const std::int64_t start = env_int("LOCO_PROFILE_START", 6), count = env_int("LOCO_PROFILE_STEPS", 2);
  // The part of the window in this run's steps done+1 … steps: a run resumed inside it, or ending inside it,
  // profiles what it has of it (before: nothing, without a word).
  const std::int64_t first = std::max(start, done + 1), last = std::min(start + count - 1, steps);
  if (first > last) {
    loco::print_unchecked(stderr,
                          "loco: note: LOCO_PROFILE_START={} and LOCO_PROFILE_STEPS={} lie outside this run's steps {} "
                          "to {}: no trace is written\n",
                          start, count, done + 1, steps);
    return nullptr;
  }
  if (first != start || last != start + count - 1) {
    loco::print_unchecked(stderr,
                          "loco: note: LOCO_PROFILE traces steps {} to {}, the part of steps {} to {} in this run\n",
                          first, last, start, start + count - 1);
  }
  auto profiler = std::unique_ptr<StepProfiler>(new StepProfiler(path, first, last - first + 1, cuda));
  // A libtorch built without Kineto (Debian's) records a profile but cannot save it: found by one empty trace
  // saved now, beside the file (an earlier trace there stays), not when the window closes (which ended the run
  // there, without its checkpoint).
  profiler->before_step(profiler->first_);
  const std::string probe = fmt::format("{}.probe-{}", profiler->path_, ::getpid());
  profiler->save_trace(probe,
                       "LOCO_PROFILE: this libtorch cannot write a trace (it was built without Kineto, as "
                       "Debian's is). Unset LOCO_PROFILE, or build loco on a libtorch with Kineto (the CUDA "
                       "wheel: docs/build.md)");
  std::error_code ignored;
  std::filesystem::remove(probe, ignored);
  return profiler;
}

void StepProfiler::save_trace(const std::string& file, const std::string& refusal) {
  if (cuda_) torch::cuda::synchronize();
  auto result = kineto::disableProfiler();
  active_ = false;
  try {
    result->save(file);
  } catch (const c10::Error& e) {
    throw ConfigError(fmt::format("{} ({})", refusal, e.what_without_backtrace()));
  }
}

StepProfiler::StepProfiler(std::string path, std::int64_t first, std::int64_t count, bool cuda)
    : path_(std::move(path)), first_(first), last_(first + count - 1), cuda_(cuda) {}

void StepProfiler::before_step(std::int64_t step) {
  if (step != first_ || active_) return;
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  kineto::prepareProfiler(config, activities(cuda_));
  if (cuda_) torch::cuda::synchronize();
  kineto::enableProfiler(config, activities(cuda_));
  active_ = true;
}

void StepProfiler::after_step(std::int64_t step) {
  if (step != last_ || !active_) return;
  // A trace that cannot be written (a full disk, a missing directory), where libtorch reports it, is said, and the
  // run goes on.
  try {
    save_trace(path_, "LOCO_PROFILE: the trace could not be written");
    loco::print_unchecked(stderr, "loco: profile of steps {}-{} written to {}\n", first_, last_, path_);
  } catch (const ConfigError& e) {
    loco::print_unchecked(stderr, "loco: warning: {}; training goes on\n", e.what());
  }
}

StepProfiler::~StepProfiler() {
  if (active_) kineto::disableProfiler();
}

}  // namespace loco
