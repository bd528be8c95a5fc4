// How deeply a TOML text nests arrays and inline tables. toml11 3.7.1 parses them by recursion, so a
// config holding a few thousand '[' overflows the stack (found by tests/fuzz/config_fuzzer.cpp): configs
// are checked before it sees them. Brackets inside strings and comments do not count; a table header
// counts as the brackets it is written with.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace loco {

// Deeper than any config needs (loco's keys nest at most one array in a table header's two brackets).
constexpr int kMaxTomlNesting = 64;

// The offset of the first '[' or '{' that opens a level deeper than `limit`; nullopt when none does.
std::optional<std::size_t> first_nesting_deeper_than(std::string_view toml, int limit);

}  // namespace loco
