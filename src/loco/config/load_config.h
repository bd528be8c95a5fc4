// Reading, overriding, completing and checking a RunConfig (DESIGN.md §3 "Config and CLI").
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "loco/config/run_config.h"

namespace loco {

// Reads FILE.toml, applies `section.key=value` overrides in order, fills derived values and
// validates. Throws ConfigError naming the file, key and fix.
RunConfig load_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides);

// Applies one `section.key=value` assignment (the value is parsed as the key's type).
void apply_override(RunConfig& config, const std::string& assignment);

// Fills the values whose 0 means "derive it": intermediate size, KV heads, positions, micro batch,
// steps from a token budget. Needs model.vocab_size to be known only for validation, not here.
void resolve_derived(RunConfig& config);

// Throws ConfigError for the first impossible value, naming the key and the fix.
void validate(const RunConfig& config);

std::string to_toml(const RunConfig& config);
nlohmann::json to_json(const RunConfig& config);
// Inverse of to_json (for checkpoints); unknown keys are errors, missing keys keep defaults.
RunConfig from_json(const nlohmann::json& json);

// Every key with its type, default and help: the text of `loco train --help-config`.
std::string describe_config_keys();

}  // namespace loco
