#include "loco/util/stack_limit.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstddef>

#include "loco/util/error.h"

namespace loco {

namespace {

constexpr rlim_t kWantedBytes = rlim_t{8} << 20;
constexpr rlim_t kLeastBytes = rlim_t{1} << 20;

}  // namespace

void make_room_on_the_stack() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_STACK, &limit) != 0) return;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < kWantedBytes) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? kWantedBytes : std::min(limit.rlim_max, kWantedBytes);
    if (::setrlimit(RLIMIT_STACK, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < kLeastBytes) {
    throw Error(
        fmt::format("the stack is limited to {} KiB (ulimit -s), and loco needs at least {} KiB: its "
                    "kernels run deep and would crash. Raise the limit, e.g. `ulimit -s 8192`, and run it "
                    "again",
                    limit.rlim_cur >> 10, kLeastBytes >> 10));
  }
  // Threads: glibc sized their default stack from the limit as the process started.
  pthread_attr_t defaults;
  if (::pthread_getattr_default_np(&defaults) != 0) return;
  std::size_t size = 0;
  if (::pthread_attr_getstacksize(&defaults, &size) == 0 && size < kWantedBytes) {
    ::pthread_attr_setstacksize(&defaults, kWantedBytes);
    ::pthread_setattr_default_np(&defaults);
  }
  ::pthread_attr_destroy(&defaults);
}

}  // namespace loco
