#include "loco/util/signal_name.h"

#include <fmt/format.h>

#include <cstring>

namespace loco {

std::string signal_name(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return abbreviation != nullptr ? fmt::format("SIG{}", abbreviation) : fmt::format("signal {}", signal);
}

}  // namespace loco
