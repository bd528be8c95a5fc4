// What a JSON library error says, for a message about the file or peer it came from.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace loco {

// e.what() without nlohmann's "[json.exception.type_error.302] " prefix: the rest ("type must be number, but is
// string") is for the reader, the prefix an index into nlohmann's own documentation.
inline std::string json_problem(const nlohmann::json::exception& e) {
  std::string_view what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    if (const std::size_t end = what.find("] "); end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return std::string(what);
}

}  // namespace loco
