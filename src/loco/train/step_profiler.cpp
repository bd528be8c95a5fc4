#include "loco/train/step_profiler.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <set>

#include "loco/util/error.h"

namespace loco {

namespace {

namespace kineto = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

std::int64_t env_int(const char* name, std::int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 10);
  if (*end != '\0' || parsed < 1) throw ConfigError(fmt::format("{}={} must be a positive integer", name, value));
  return parsed;
}

std::set<impl::ActivityType> activities(bool cuda) {
  std::set<impl::ActivityType> out{impl::ActivityType::CPU};
  if (cuda) out.insert(impl::ActivityType::CUDA);
  return out;
}

}  // namespace

std::unique_ptr<StepProfiler> StepProfiler::from_environment(bool cuda) {
  const char* path = std::getenv("LOCO_PROFILE");
  if (path == nullptr || *path == '\0') return nullptr;
  return std::unique_ptr<StepProfiler>(
      new StepProfiler(path, env_int("LOCO_PROFILE_START", 6), env_int("LOCO_PROFILE_STEPS", 2), cuda));
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
  if (cuda_) torch::cuda::synchronize();
  auto result = kineto::disableProfiler();
  active_ = false;
  result->save(path_);
  fmt::print(stderr, "loco: profile of steps {}-{} written to {}\n", first_, last_, path_);
}

StepProfiler::~StepProfiler() {
  if (active_) kineto::disableProfiler();
}

}  // namespace loco
