// How deeply a JSON text nests its arrays and objects, counted before it is parsed: nlohmann::json builds one
// value per level, and 16 MiB of '[' from a peer took 1.4 GB where the text alone is 16 MiB. A reader of
// untrusted JSON refuses a text that nests deeper than its messages ever do.
#pragma once

#include <cstddef>
#include <string_view>

namespace loco {

// What a character of JSON text is, fed in order: part of a string (its escapes followed), one of a string's
// quotes, or structure (brackets, separators, scalars, whitespace). Lets a reader find brackets and strings'
// ends without parsing.
class JsonCharacters {
 public:
  enum class Kind { in_string, opens_string, closes_string, structure };
  Kind feed(char c) {
    if (!in_string_) {
      if (c != '"') return Kind::structure;
      in_string_ = true;
      return Kind::opens_string;
    }
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      in_string_ = false;
      return Kind::closes_string;
    }
    return Kind::in_string;
  }

 private:
  bool in_string_ = false, escaped_ = false;
};

// The deepest nesting of '[' and '{' in `text` outside strings (0 for a scalar); stops counting past `limit`
// and returns limit + 1. The text need not be valid JSON: the parser judges that.
std::size_t json_nesting(std::string_view text, std::size_t limit);

}  // namespace loco
