// The table of config keys: type, help text, the values a string key may take, and access to the
// field of RunConfig it names. Parsing, validation of choices, printing and `--help-config` all read it.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "loco/config/run_config.h"

namespace loco {

using ConfigValue = std::variant<std::int64_t, double, bool, std::string>;

// One value a string key may take, with what it means ("" when the name says it).
struct ConfigChoice {
  std::string name;
  std::string meaning;
};

struct ConfigKey {
  std::string section;
  std::string name;
  std::string help;
  std::vector<ConfigChoice> choices;  // empty: any value of the key's type
  std::function<ConfigValue(const RunConfig&)> get;
  std::function<void(RunConfig&, const ConfigValue&)> set;  // value already of the key's type

  std::string dotted() const { return section + "." + name; }
  const char* type_name() const;  // "integer", "float", "boolean", "string"
  // The help line: the help text, then the choices with their meanings ("cpu | cuda | auto").
  std::string description() const;
  // Whether `value` is allowed (always, for a key without choices).
  bool allows(const std::string& value) const;
  // "split or per_replica", "cpu, cuda or auto": for error messages.
  std::string choice_list() const;
};

const std::vector<ConfigKey>& config_keys();

// The key `section.name`, or nullptr.
const ConfigKey* find_config_key(const std::string& section, const std::string& name);

// "did you mean 'optim.lr'?" for a mistyped key, or "" when nothing is close.
std::string suggest_config_key(const std::string& dotted);

std::string format_config_value(const ConfigValue& value);

// Whether codec `name` quantises with scale blocks of comm.block_size values (int8, fp4, int4; not fp32, bf16).
bool quantising_codec(const std::string& name);

}  // namespace loco
