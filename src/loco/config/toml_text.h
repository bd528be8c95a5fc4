// Reading a TOML file's text so that toml11 can be given it safely: toml11 3.7.1 reads past its buffer
// on a literal string that is not UTF-8, and parses nested arrays and inline tables by recursion, so a few
// thousand '[' overflow its stack (both found by tests/fuzz/config_fuzzer.cpp). Configs and sweep files
// are checked here before it sees them.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace loco {

// Deeper than any file of loco's needs (its keys nest at most one array in a table header's two brackets).
constexpr int kMaxTomlNesting = 64;

// The text of `file`, a `what` ("config file", "sweep file"): ConfigError naming the file, the place and
// the fix when it is not a regular file, is not UTF-8, or nests deeper than kMaxTomlNesting.
std::string read_toml_text(const std::filesystem::path& file, const std::string& what);

// The offset of the first '[' or '{' that opens a level deeper than `limit`; nullopt when none does.
// Brackets inside strings and comments do not count; a table header counts as the brackets it is
// written with.
std::optional<std::size_t> first_nesting_deeper_than(std::string_view toml, int limit);

}  // namespace loco
