// How deeply a JSON text nests its arrays and objects, counted before it is parsed: nlohmann::json builds one
// value per level, and 16 MiB of '[' from a peer took 1.4 GB where the text alone is 16 MiB. A reader of
// untrusted JSON refuses a text that nests deeper than its messages ever do.
#pragma once

#include <cstddef>
#include <string_view>

namespace loco {

// The deepest nesting of '[' and '{' in `text` outside strings (0 for a scalar); stops counting past `limit`
// and returns limit + 1. The text need not be valid JSON: the parser judges that.
std::size_t json_nesting(std::string_view text, std::size_t limit);

}  // namespace loco
