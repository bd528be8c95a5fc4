#include "loco/util/open_file_limit.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>

#include "loco/util/error.h"

namespace loco {

std::uint64_t raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  constexpr rlim_t kMost = rlim_t{1} << 20;
  const rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? kMost : std::min(limit.rlim_max, kMost);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    rlimit raised = limit;
    raised.rlim_cur = wanted;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? kMost : static_cast<std::uint64_t>(limit.rlim_cur);
}

void require_open_file_room() {
  constexpr std::uint64_t kLeast = 32;
  if (const std::uint64_t limit = raise_open_file_limit(); limit < kLeast) {
    throw Error(
        fmt::format("the process may open {} file descriptors (ulimit -n), and loco needs at least {}: raise "
                    "the limit (ulimit -n 1024) and run it again",
                    limit, kLeast));
  }
}

}  // namespace loco
