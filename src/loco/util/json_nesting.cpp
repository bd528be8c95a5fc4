#include "loco/util/json_nesting.h"

namespace loco {

std::size_t json_nesting(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  JsonCharacters characters;
  for (const char c : text) {
    if (characters.feed(c) != JsonCharacters::Kind::structure) continue;
    if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return limit + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace loco
