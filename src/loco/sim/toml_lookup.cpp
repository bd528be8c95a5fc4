#include "loco/sim/toml_lookup.h"

#include <sstream>

#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco::sim {

namespace {

const toml::value* find_value(const toml::value& root, const std::string& section, const std::string& key) {
  if (!root.is_table() || !root.contains(section)) return nullptr;
  const toml::value& table = root.at(section);
  if (!table.is_table() || !table.contains(key)) return nullptr;
  return &table.at(key);
}

[[noreturn]] void wrong_type(const std::string& source, const std::string& section, const std::string& key,
                             const char* expected) {
  throw ConfigError(fmt::format("{}: [{}] {} must be {}; fix the value in the file.", source, section, key, expected));
}

}  // namespace

toml::value read_toml(const fs::path& path) {
  std::string text = read_file(path);
  std::istringstream stream(text);
  try {
    return toml::parse(stream, path.string());
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("{} is not valid TOML: {}", path.string(), e.what()));
  }
}

std::optional<double> find_number(const toml::value& root, const std::string& section, const std::string& key,
                                  const std::string& source) {
  const toml::value* v = find_value(root, section, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_integer()) return static_cast<double>(v->as_integer());
  if (v->is_floating()) return v->as_floating();
  wrong_type(source, section, key, "a number");
}

std::optional<std::int64_t> find_integer(const toml::value& root, const std::string& section, const std::string& key,
                                         const std::string& source) {
  const toml::value* v = find_value(root, section, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_integer()) return v->as_integer();
  wrong_type(source, section, key, "a whole number");
}

std::optional<bool> find_bool(const toml::value& root, const std::string& section, const std::string& key,
                              const std::string& source) {
  const toml::value* v = find_value(root, section, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->as_boolean();
  wrong_type(source, section, key, "true or false");
}

std::optional<std::string> find_string(const toml::value& root, const std::string& section, const std::string& key,
                                       const std::string& source) {
  const toml::value* v = find_value(root, section, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->as_string().str;
  wrong_type(source, section, key, "a string");
}

}  // namespace loco::sim
