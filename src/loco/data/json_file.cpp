#include "loco/data/json_file.h"

#include <fmt/format.h>

#include "loco/util/fs.h"
#include "loco/util/json_problem.h"

namespace loco::data {

namespace {

constexpr std::uintmax_t kMaxJsonFileBytes = 64u << 20;

}  // namespace

DataError malformed_json_file(const std::filesystem::path& path, std::string_view problem, std::string_view fix) {
  return DataError(fmt::format("{} is malformed ({}). {}", path.string(), problem, fix));
}

nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view fix) {
  std::error_code ignored, unreadable;
  const auto status = std::filesystem::status(path, unreadable);
  if (unreadable && unreadable != std::errc::no_such_file_or_directory) {
    throw DataError(fmt::format("{} cannot be read ({}). {}", path.string(), unreadable.message(), fix));
  }
  if (!std::filesystem::exists(status)) throw DataError(fmt::format("{} does not exist. {}", path.string(), fix));
  if (!std::filesystem::is_regular_file(status)) {
    throw DataError(fmt::format("{} is not a regular file (a directory, FIFO or device). {}", path.string(), fix));
  }
  // The files loco writes this way (meta.json, tokenizer.json) are kilobytes; a huge one is not loco's, and
  // parsing it would take gigabytes.
  if (std::filesystem::file_size(path, ignored) > kMaxJsonFileBytes) {
    throw malformed_json_file(path, fmt::format("larger than {} MiB", kMaxJsonFileBytes >> 20), fix);
  }
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw malformed_json_file(path, json_problem(e), fix);
  }
}

}  // namespace loco::data
