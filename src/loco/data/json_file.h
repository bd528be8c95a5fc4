// Reading the small JSON files of a data directory (meta.json, tokenizer.json) with errors that
// name the file and say how to fix it, instead of nlohmann's bare exception text.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "loco/util/error.h"
#include "loco/util/json_problem.h"

namespace loco::data {

// Parses the JSON file at `path`; DataError naming the file and `fix` when missing or malformed.
nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view fix);

// The DataError for a JSON file whose content is wrong (`problem` says what).
DataError malformed_json_file(const std::filesystem::path& path, std::string_view problem, std::string_view fix);

// Runs `read()` (which pulls fields out of a parsed file) and turns a missing or mistyped field
// into malformed_json_file.
template <typename Read>
auto read_json_fields(const std::filesystem::path& path, std::string_view fix, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    throw malformed_json_file(path, json_problem(e), fix);
  }
}

}  // namespace loco::data
