#include "loco/train/fault_injection.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "loco/util/error.h"

namespace loco {

std::unique_ptr<FaultInjection> FaultInjection::from_environment() {
  const char* value = std::getenv("LOCO_FAULT");
  if (value == nullptr || *value == '\0') return nullptr;
  const std::string text = value;
  const auto colon = text.find(':');
  const std::string kind = colon == std::string::npos ? "" : text.substr(colon + 1);
  char* end = nullptr;
  const long long step = std::strtoll(text.c_str(), &end, 10);
  if (colon == std::string::npos || end != text.c_str() + colon || step < 1 || (kind != "KILL" && kind != "STOP")) {
    throw ConfigError(fmt::format("LOCO_FAULT={} is not STEP:KILL or STEP:STOP (for example LOCO_FAULT=12:KILL)", text));
  }
  return std::unique_ptr<FaultInjection>(new FaultInjection(step, kind == "KILL" ? SIGKILL : SIGSTOP));
}

void FaultInjection::after_step(std::int64_t step) const {
  if (step == step_) std::raise(signal_);
}

}  // namespace loco
