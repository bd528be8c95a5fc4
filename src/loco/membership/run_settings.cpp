#include "loco/membership/run_settings.h"

#include <fmt/format.h>

#include <algorithm>

#include "loco/membership/membership_error.h"
#include "loco/membership/sha256.h"
#include "loco/membership/untrusted_text.h"
#include "loco/util/json_difference.h"

namespace loco::membership {

namespace {

// A value as the log shows it: a member's text is cut, and escaped (untrusted_text.h).
std::string shown(const nlohmann::json& value) {
  constexpr std::size_t kShownBytes = 100;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kShownBytes) text = text.substr(0, kShownBytes) + "…";
  return loggable(text);
}

}  // namespace

std::optional<std::string> settings_difference(const nlohmann::json& settings, const nlohmann::json& run) {
  const auto difference = first_key_difference(settings, run);
  if (!difference) return std::nullopt;
  const std::string key = loggable(difference->key);
  if (!difference->in_a) return fmt::format("no {}, where the run's members have {}", key, shown(*difference->in_b));
  if (!difference->in_b)
    return fmt::format("{} = {}, which the run's members do not have", key, shown(*difference->in_a));
  return fmt::format("{} = {}, but the run's members have {}", key, shown(*difference->in_a), shown(*difference->in_b));
}

nlohmann::json join_settings(const nlohmann::json& join) {
  const auto found = join.find("settings");
  if (found == join.end()) return nlohmann::json::object();
  const bool well_formed = found->is_object() &&
                           std::all_of(found->begin(), found->end(), [](const auto& keys) { return keys.is_object(); });
  if (!well_formed) {
    throw MembershipError(Refusal::malformed, "a join's \"settings\" must be an object of sections, each an object");
  }
  return *found;
}

std::string settings_digest(const nlohmann::json& settings) {
  if (settings.empty()) return "";
  return to_hex(sha256(settings.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

}  // namespace loco::membership
