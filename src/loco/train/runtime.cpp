#include "loco/train/runtime.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <malloc.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "loco/util/error.h"
#include "loco/util/thread_room.h"

namespace loco {

torch::Device resolve_device(const std::string& name, const std::string& setting) {
  if (name == "cpu") return torch::kCPU;
  const bool cuda = torch::cuda::is_available();
  if (name == "auto") return cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (!cuda) {
    // "--device cuda" for an option, "train.device = cuda" for a config key.
    const std::string chosen = setting.rfind("--", 0) == 0 ? setting : setting + " =";
    throw ConfigError(fmt::format(
        "{} cuda, but this loco was built against a CPU-only libtorch or no GPU is visible. Use {} cpu (or auto), "
        "or build loco against a CUDA libtorch (see docs/build.md)",
        chosen, chosen));
  }
  return torch::kCUDA;
}

std::int64_t intra_op_threads(std::int64_t configured, const torch::Device& device) {
  if (configured > 0) return configured;
  return device.is_cuda() ? static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency())) : 1;
}

void configure_threads(std::int64_t threads, const torch::Device& device) {
  const auto intra_op = static_cast<int>(intra_op_threads(threads, device));
  // Note "thread-room" (util/thread_room.h): the pool set_num_threads makes has a thread per core; one more
  // was needed (measured under ulimit -u on this 2-core VM: 4 tasks hung, 5 trained).
  // Once per process: the pool is made once, and replicas as threads each configure the same.
  static std::once_flag checked;
  std::call_once(checked, [&] {
    require_room_for_threads(std::max<int>(intra_op, static_cast<int>(std::thread::hardware_concurrency())) + 1);
  });
  torch::set_num_threads(intra_op);
  keep_freed_memory_in_heap();
}

void limit_blas_threads(std::int64_t threads) {
  const std::int64_t n = threads > 0 ? threads : 1;  // note "auto-threads": replicas that share the cores
  // Looked up at run time: libblas.so.3 is whichever BLAS Debian's alternatives point to.
  using SetThreads = void (*)(int);
  if (const auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(static_cast<int>(n));
  }
}

int blas_threads_per_call() {
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : 0;
}

void keep_freed_memory_in_heap() {
  ::mallopt(M_MMAP_MAX, 0);
  ::mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  ::mallopt(M_ARENA_MAX, 1);
}

}  // namespace loco
