// Reading a few keys from a loco TOML config (toml11) without the full config schema: the planning
// tools need only [model] shapes and a handful of run settings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <toml.hpp>

namespace loco::sim {

// Parses a TOML file. Throws IoError when unreadable and ConfigError on a syntax error.
toml::value read_toml(const std::filesystem::path& path);

// `[section] key`, or nullopt when the section or key is absent. Throws ConfigError naming
// `source`, the section and the key when the value has the wrong type.
std::optional<double> find_number(const toml::value& root, const std::string& section, const std::string& key,
                                  const std::string& source);
std::optional<std::int64_t> find_integer(const toml::value& root, const std::string& section, const std::string& key,
                                         const std::string& source);
std::optional<bool> find_bool(const toml::value& root, const std::string& section, const std::string& key,
                              const std::string& source);
std::optional<std::string> find_string(const toml::value& root, const std::string& section, const std::string& key,
                                       const std::string& source);

}  // namespace loco::sim
