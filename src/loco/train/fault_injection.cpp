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
  const std::string whole = value;
  const auto at = whole.find('@');
  const std::string member = at == std::string::npos ? "" : whole.substr(0, at);
  const std::string text = at == std::string::npos ? whole : whole.substr(at + 1);
  const auto colon = text.find(':');
  const std::string kind = colon == std::string::npos ? "" : text.substr(colon + 1);
  char* end = nullptr;
  const long long step = std::strtoll(text.c_str(), &end, 10);
  if (colon == std::string::npos || end != text.c_str() + colon || step < 1 || (kind != "KILL" && kind != "STOP")) {
    throw ConfigError(fmt::format("LOCO_FAULT={} is not [NAME@]STEP:KILL or [NAME@]STEP:STOP (for example "
                                  "LOCO_FAULT=12:KILL or LOCO_FAULT=rank-2@12:STOP)",
                                  whole));
  }
  const char* name = std::getenv("LOCO_MEMBER_NAME");
  if (!member.empty() && member != (name ? name : "")) return nullptr;
  return std::unique_ptr<FaultInjection>(new FaultInjection(step, kind == "KILL" ? SIGKILL : SIGSTOP));
}

void FaultInjection::after_step(std::int64_t step) const {
  if (step == step_) std::raise(signal_);
}

}  // namespace loco
