#include "loco/util/error.h"

namespace loco {

void fail_check(const char* file, int line, const char* condition, const std::string& message) {
  throw InternalError(
      fmt::format("internal error at {}:{}: check `{}` failed: {}", file, line, condition, message));
}

}  // namespace loco
