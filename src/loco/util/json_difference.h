// Two JSON objects of sections, each an object of values ({"model": {"hidden_size": 64}, …}: a config as
// to_json writes it, an elastic member's settings), compared key by key: the one comparison behind "the stages'
// checkpoints come from different runs", "its config changed since its result" and a coordinator's refusal of a
// member whose settings differ.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace loco {

struct KeyDifference {
  std::string key;                           // "section.key"
  std::optional<nlohmann::json> in_a, in_b;  // its value on each side; nullopt where that side has no such key
};

// The first "section.key", in sorted order, whose value differs between `a` and `b` (an empty section holds no
// key); nullopt when none does.
std::optional<KeyDifference> first_key_difference(const nlohmann::json& a, const nlohmann::json& b);

// A value of a KeyDifference as JSON text, "(none)" where absent.
std::string value_text(const std::optional<nlohmann::json>& value);

}  // namespace loco
