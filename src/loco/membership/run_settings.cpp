#include "loco/membership/run_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "loco/membership/membership_error.h"
#include "loco/membership/sha256.h"
#include "loco/membership/untrusted_text.h"

namespace loco::membership {

namespace {

// A value as the log shows it: a member's text is cut, and escaped (untrusted_text.h).
std::string shown(const nlohmann::json& value) {
  constexpr std::size_t kShownBytes = 100;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kShownBytes) text = text.substr(0, kShownBytes) + "…";
  return loggable(text);
}

// "section.key" → value.
std::map<std::string, nlohmann::json> by_key(const nlohmann::json& settings) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& [section, keys] : settings.items()) {
    for (const auto& [key, value] : keys.items()) out[section + "." + key] = value;
  }
  return out;
}

}  // namespace

std::optional<std::string> settings_difference(const nlohmann::json& settings, const nlohmann::json& run) {
  const auto theirs = by_key(settings), runs = by_key(run);
  if (theirs == runs) return std::nullopt;
  for (const auto& [key, value] : runs) {
    const auto found = theirs.find(key);
    if (found == theirs.end())
      return fmt::format("no {}, where the run's members have {}", loggable(key), shown(value));
    if (found->second != value) {
      return fmt::format("{} = {}, but the run's members have {}", loggable(key), shown(found->second), shown(value));
    }
  }
  for (const auto& [key, value] : theirs) {
    if (runs.count(key) == 0) {
      return fmt::format("{} = {}, which the run's members do not have", loggable(key), shown(value));
    }
  }
  return std::nullopt;  // not reached: maps that differ differ in a key or a value
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
