#include "loco/config/toml_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/utf8.h"

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

// The line (from 1) of the byte at `offset` of `text`.
std::ptrdiff_t line_of(const std::string& text, std::size_t offset) {
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

// "byte B of line L" (both from 1) for the byte at `offset` of `text` (not a newline).
std::string where_in(const std::string& text, std::size_t offset) {
  const auto line_start = text.rfind('\n', offset);
  return fmt::format("byte {} of line {}", line_start == std::string::npos ? offset + 1 : offset - line_start,
                     line_of(text, offset));
}

}  // namespace

std::string read_toml_text(const std::filesystem::path& file, const std::string& what) {
  if (!std::filesystem::is_regular_file(file)) {
    throw ConfigError(fmt::format("{} '{}' {}; pass an existing TOML file", what, file.string(),
                                  std::filesystem::exists(file) ? "is not a file" : "does not exist"));
  }
  if (std::filesystem::file_size(file) > kMaxTomlFileBytes) {
    throw ConfigError(
        fmt::format("{} '{}' holds {} bytes, more than the {} MiB a {} may hold; no setting needs "
                    "that much, so check that this is the file you meant",
                    what, file.string(), std::filesystem::file_size(file), kMaxTomlFileBytes >> 20, what));
  }
  std::string text = read_file(file, kMaxTomlFileBytes);
  if (const auto long_line = first_line_longer_than(text, kMaxTomlLineBytes)) {
    throw ConfigError(
        fmt::format("{}: line {} is longer than {} bytes; break a long array over several lines "
                    "(TOML allows a newline after any comma)",
                    file.string(), line_of(text, *long_line), kMaxTomlLineBytes));
  }
  if (const auto bad = first_invalid_utf8(text)) {
    throw ConfigError(fmt::format("{} is not UTF-8: {} (0x{:02x}) starts no valid UTF-8 sequence; TOML files are "
                                  "UTF-8, so save the file as UTF-8",
                                  file.string(), where_in(text, *bad), static_cast<unsigned char>(text[*bad])));
  }
  if (const auto deep = first_nesting_deeper_than(text, kMaxTomlNesting)) {
    throw ConfigError(fmt::format("{}: arrays or inline tables nest more than {} deep at {}; no loco setting nests "
                                  "them, so remove the extra brackets",
                                  file.string(), kMaxTomlNesting, where_in(text, *deep)));
  }
  return text;
}

toml::value parse_toml_file(const std::filesystem::path& file, const std::string& what) {
  const std::string text = read_toml_text(file, what);
  try {
    std::istringstream stream(text);
    return toml::parse(stream, file.string());
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("cannot parse {} as TOML: {}", file.string(), toml_parse_error_text(e.what())));
  }
}

std::string toml_parse_error_text(std::string_view what) {
  constexpr std::string_view kPrefix = "[error] toml::";
  std::string text(what);
  if (text.rfind(kPrefix, 0) == 0) {
    const std::size_t colon = text.find(": ");
    if (colon != std::string::npos) text.erase(0, colon + 2);
  }
  for (const std::string_view kind : {"value", "table"}) {
    // `value ("hidden_size") already exists.` -> `hidden_size is given twice ...`
    const std::string opening = std::string(kind) + " (\"";
    const std::string closing = "\") already exists.";
    const std::size_t end = text.find(closing);
    if (text.rfind(opening, 0) == 0 && end != std::string::npos) {
      const std::string key = text.substr(opening.size(), end - opening.size());
      text.replace(0, end + closing.size(),
                   fmt::format("{} {} is given twice; TOML allows each key and table once, so remove one",
                               kind == "table" ? "the table" : "the key", key));
    }
  }
  return text;
}

std::optional<std::size_t> first_line_longer_than(std::string_view text, std::size_t limit) {
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    if (end - begin > limit) return begin;
    begin = end + 1;
  }
  return std::nullopt;
}

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
