#include "loco/util/json_difference.h"

#include <map>
#include <set>

namespace loco {

namespace {

// "section.key" → value; a section that is no object is a key of its own.
std::map<std::string, nlohmann::json> by_key(const nlohmann::json& sections) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& [section, keys] : sections.items()) {
    if (!keys.is_object()) {
      out[section] = keys;
      continue;
    }
    for (const auto& [key, value] : keys.items()) out[section + "." + key] = value;
  }
  return out;
}

std::optional<nlohmann::json> value_of(const std::map<std::string, nlohmann::json>& values, const std::string& key) {
  const auto found = values.find(key);
  return found == values.end() ? std::nullopt : std::optional<nlohmann::json>(found->second);
}

}  // namespace

std::optional<KeyDifference> first_key_difference(const nlohmann::json& a, const nlohmann::json& b) {
  const auto in_a = by_key(a), in_b = by_key(b);
  std::set<std::string> keys;
  for (const auto* side : {&in_a, &in_b}) {
    for (const auto& [key, value] : *side) keys.insert(key);
  }
  for (const std::string& key : keys) {
    const auto value_a = value_of(in_a, key), value_b = value_of(in_b, key);
    if (value_a != value_b) return KeyDifference{key, value_a, value_b};
  }
  return std::nullopt;
}

std::string value_text(const std::optional<nlohmann::json>& value) { return value ? value->dump() : "(none)"; }

}  // namespace loco
