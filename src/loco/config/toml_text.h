// Reading a TOML file's text so that toml11 can be given it safely: toml11 3.7.1 reads past its buffer
// on a literal string that is not UTF-8, and parses nested arrays and inline tables by recursion, so a few
// thousand '[' overflow its stack (both found by tests/fuzz/config_fuzzer.cpp), and its time grows with each
// value's line length times the values on it (it looks for comments along the line of every value: 50,000
// sweep values on one 290 KB line took 9 s, split over lines 0.9 s). Configs and sweep files are checked
// here before it sees them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <toml.hpp>

namespace loco {

// Deeper than any file of loco's needs (its keys nest at most one array in a table header's two brackets).
constexpr int kMaxTomlNesting = 64;

// Far beyond any config or sweep file (a 10,000-run sweep spelled out is a few hundred KB), and short
// enough that toml11's time per line stays in milliseconds.
constexpr std::uint64_t kMaxTomlFileBytes = 4 << 20;
constexpr std::size_t kMaxTomlLineBytes = 16 << 10;

// The text of `file`, a `what` ("config file", "sweep file"): ConfigError naming the file, the place and
// the fix when it is not a regular file, is larger than kMaxTomlFileBytes, has a line longer than
// kMaxTomlLineBytes, is not UTF-8, or nests deeper than kMaxTomlNesting.
std::string read_toml_text(const std::filesystem::path& file, const std::string& what);

// `file` read by read_toml_text and parsed; ConfigError naming the file and toml11's complaint in loco's
// words (toml_parse_error_text) when it is not TOML.
toml::value parse_toml_file(const std::filesystem::path& file, const std::string& what);

// The offset of the first '[' or '{' that opens a level deeper than `limit`; nullopt when none does.
// Brackets inside strings and comments do not count; a table header counts as the brackets it is
// written with.
std::optional<std::size_t> first_nesting_deeper_than(std::string_view toml, int limit);

// toml11's parse error as loco shows it: without its "[error] toml::function_name: " prefix, which names
// toml11's code rather than the problem, and with "value ("x") already exists." said in words.
std::string toml_parse_error_text(std::string_view what);

// The offset of the first line longer than `limit` bytes (its newline not counted); nullopt when none is.
std::optional<std::size_t> first_line_longer_than(std::string_view text, std::size_t limit);

}  // namespace loco
