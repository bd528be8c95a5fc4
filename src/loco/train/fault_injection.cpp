#include "loco/train/fault_injection.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "loco/util/error.h"
#include "loco/util/parse_number.h"

namespace loco {

std::unique_ptr<FaultInjection> FaultInjection::from_environment() {
  const char* value = std::getenv("LOCO_FAULT");
  if (value == nullptr || *value == '\0') return nullptr;
  const std::string whole = value;
  const auto at = whole.find('@');
  const std::string member = at == std::string::npos ? "" : whole.substr(0, at);
  const std::string text = at == std::string::npos ? whole : whole.substr(at + 1);
  const auto colon = text.find(':');
  const std::string when = text.substr(0, colon);
  const std::string kind = colon == std::string::npos ? "" : text.substr(colon + 1);
  std::optional<std::int64_t> step;
  std::optional<FaultMoment> moment;
  if (when == "exchanging") {
    moment = FaultMoment::exchanging;
  } else if (when == "donating") {
    moment = FaultMoment::donating;
  } else if (when == "receiving") {
    moment = FaultMoment::receiving;
  } else {
    char* end = nullptr;
    const long long parsed = std::strtoll(when.c_str(), &end, 10);
    if (!when.empty() && *end == '\0' && parsed >= 1) step = parsed;
  }
  const bool known_kind = kind == "KILL" || kind == "STOP" || (kind == "CORRUPT" && moment == FaultMoment::donating);
  if (colon == std::string::npos || (!step && !moment) || !known_kind) {
    throw ConfigError(fmt::format("LOCO_FAULT={} is not [NAME@]WHEN:ACTION with WHEN a step number, exchanging, "
                                  "donating or receiving and ACTION KILL or STOP (or donating:CORRUPT); for example "
                                  "LOCO_FAULT=12:KILL, LOCO_FAULT=rank-2@12:STOP or LOCO_FAULT=a@donating:KILL",
                                  whole));
  }
  const char* name = std::getenv("LOCO_MEMBER_NAME");
  if (!member.empty() && member != (name ? name : "")) return nullptr;
  // A rank that `loco launch --elastic` started again (its n-th process, n > 1) plays no fault: one that resumed
  // from a checkpoint before the fault's step would meet it again in every life.
  const char* life = std::getenv("LOCO_RANK_START");
  const auto process = parse_whole_number(life ? life : "");
  if (process && *process > 1) return nullptr;
  const Action action = kind == "KILL" ? Action::kill : kind == "STOP" ? Action::stop : Action::corrupt;
  return std::unique_ptr<FaultInjection>(new FaultInjection(step, moment, action));
}

void FaultInjection::after_step(std::int64_t step) const {
  if (step_ == step) std::raise(action_ == Action::kill ? SIGKILL : SIGSTOP);
}

bool FaultInjection::at(FaultMoment moment) {
  if (moment_ != moment || fired_) return false;
  fired_ = true;
  if (action_ == Action::corrupt) return true;
  std::raise(action_ == Action::kill ? SIGKILL : SIGSTOP);
  return false;
}

}  // namespace loco
