// What every member of a run must share (note "member-settings"): a member joins with its settings, the
// run layer's config keys that must agree among members ({"model": {"hidden_size": 64}, …}), and the
// coordinator refuses one whose settings differ from the run's members'. Without it a member given another
// model size aborted its peers inside gloo (a message of the wrong length) and was healed and aborted again
// without end, and one given another diloco.sync_every trained beside the others, its rounds thrown away.
// The membership layer does not read the keys: it compares them, and names the first that differs.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace loco::membership {

// Where `settings` (a joiner's) differ from `run` (the run's members'), in words: "model.hidden_size = 32,
// but the run's members have 64"; nullopt when they are the same. Values are cut and escaped for the log.
std::optional<std::string> settings_difference(const nlohmann::json& settings, const nlohmann::json& run);

// A join's "settings" (optional: an empty object when absent): an object of sections, each an object of
// values. MembershipError(malformed) for any other shape.
nlohmann::json join_settings(const nlohmann::json& join);

// What a join's MAC covers of its settings: their SHA-256, "" for none (so a join without settings signs its
// name alone, as before).
std::string settings_digest(const nlohmann::json& settings);

}  // namespace loco::membership
