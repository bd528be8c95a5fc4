#include "loco/config/toml_nesting.h"

namespace loco {
namespace {

// The offset just past the string that opens at `begin` (a ', ", ''' or """ string), or the text's end
// when it is not closed (toml11 reports that). Basic strings take backslash escapes; single-line
// strings also end at a newline, which toml11 refuses.
std::size_t skip_string(std::string_view t, std::size_t begin) {
  const char quote = t[begin];
  const bool multiline = t.substr(begin, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''");
  const std::size_t open = multiline ? 3 : 1;
  for (std::size_t i = begin + open; i < t.size(); ++i) {
    if (quote == '"' && t[i] == '\\') {
      ++i;  // the escaped character cannot close the string
    } else if (!multiline && t[i] == '\n') {
      return i;
    } else if (t[i] == quote && (!multiline || t.substr(i, 3) == t.substr(begin, 3))) {
      return i + open;
    }
  }
  return t.size();
}

}  // namespace

std::optional<std::size_t> first_nesting_deeper_than(std::string_view t, int limit) {
  int depth = 0;
  for (std::size_t i = 0; i < t.size();) {
    const char c = t[i];
    if (c == '"' || c == '\'') {
      i = skip_string(t, i);
      continue;
    }
    if (c == '#') {
      const std::size_t end = t.find('\n', i);
      i = end == std::string_view::npos ? t.size() : end;
      continue;
    }
    if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    ++i;
  }
  return std::nullopt;
}

}  // namespace loco
