#include "loco/data/json_file.h"

#include <fmt/format.h>

#include "loco/util/fs.h"

namespace loco::data {

DataError malformed_json_file(const std::filesystem::path& path, std::string_view problem, std::string_view fix) {
  return DataError(fmt::format("{} is malformed ({}). {}", path.string(), problem, fix));
}

nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view fix) {
  if (!std::filesystem::is_regular_file(path)) {
    throw DataError(fmt::format("{} does not exist. {}", path.string(), fix));
  }
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw malformed_json_file(path, e.what(), fix);
  }
}

}  // namespace loco::data
