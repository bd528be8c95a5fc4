// The table of config keys: type, help text and access to the field of RunConfig it names.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "loco/config/run_config.h"

namespace loco {

using ConfigValue = std::variant<std::int64_t, double, bool, std::string>;

struct ConfigKey {
  std::string section;
  std::string name;
  std::string help;
  std::function<ConfigValue(const RunConfig&)> get;
  std::function<void(RunConfig&, const ConfigValue&)> set;  // value already of the key's type

  std::string dotted() const { return section + "." + name; }
  const char* type_name() const;  // "integer", "float", "boolean", "string"
};

const std::vector<ConfigKey>& config_keys();

// The key `section.name`, or nullptr.
const ConfigKey* find_config_key(const std::string& section, const std::string& name);

// "did you mean 'optim.lr'?" for a mistyped key, or "" when nothing is close.
std::string suggest_config_key(const std::string& dotted);

std::string format_config_value(const ConfigValue& value);

}  // namespace loco
