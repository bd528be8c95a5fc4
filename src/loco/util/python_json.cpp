#include "loco/util/python_json.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace loco {
namespace {

// The UTF-16 code unit of a "\uXXXX" escape whose 'u' is at `at`, or nothing where four hex digits do not follow.
std::optional<unsigned> escaped_code_unit(std::string_view json, std::size_t at) {
  if (at + 5 > json.size() || json[at] != 'u') return std::nullopt;
  unsigned unit = 0;
  for (std::size_t i = at + 1; i < at + 5; ++i) {
    const char c = json[i];
    unsigned digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    unit = unit * 16 + digit;
  }
  return unit;
}

bool is_high_surrogate(unsigned unit) { return unit >= 0xD800 && unit <= 0xDBFF; }
bool is_low_surrogate(unsigned unit) { return unit >= 0xDC00 && unit <= 0xDFFF; }

// The length of the non-finite literal Python writes that begins at `at` outside a string, or 0. Valid JSON has
// no 'N' or 'I' outside strings, and '-' only before digits, so a match is never a part of valid JSON.
std::size_t non_finite_literal(std::string_view json, std::size_t at) {
  for (const std::string_view literal : {"NaN", "Infinity", "-Infinity"}) {
    if (json.substr(at, literal.size()) == literal) return literal.size();
  }
  return 0;
}

// The length of the number that begins at `at` outside a string (0 where none does), and whether it lies beyond
// double's range, as strtod (and so the parser) reads it.
std::pair<std::size_t, bool> number_at(std::string_view json, std::size_t at) {
  const char first = at < json.size() ? json[at] : '\0';
  if (first != '-' && (first < '0' || first > '9')) return {0, false};
  const std::size_t end = json.find_first_not_of("0123456789+-.eE", at);
  const std::string number(json.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
  return {number.size(), std::isinf(std::strtod(number.c_str(), nullptr))};
}

}  // namespace

std::size_t rewrite_python_json_extensions(std::string& json) {
  const std::string_view text = json;
  std::string out;
  std::size_t rewrites = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (!in_string) {
      if (const std::size_t length = non_finite_literal(text, i); length > 0) {
        out += "null";
        i += length;
        ++rewrites;
        continue;
      }
      if (const auto [length, infinite] = number_at(text, i); length > 0) {
        out += infinite ? std::string_view("null") : text.substr(i, length);
        i += length;
        rewrites += infinite ? 1 : 0;
        continue;
      }
      in_string = c == '"';
      out.push_back(c);
      ++i;
      continue;
    }
    if (c != '\\') {
      in_string = c != '"';
      out.push_back(c);
      ++i;
      continue;
    }
    // An escape: a surrogate pair is kept whole, a surrogate alone replaced, anything else copied as it is.
    if (const auto unit = escaped_code_unit(text, i + 1);
        unit && (is_high_surrogate(*unit) || is_low_surrogate(*unit))) {
      const auto partner = text.substr(i + 6, 1) == "\\" ? escaped_code_unit(text, i + 7) : std::nullopt;
      if (is_high_surrogate(*unit) && partner && is_low_surrogate(*partner)) {
        out.append(text.substr(i, 12));
        i += 12;
      } else {
        out += "\\ufffd";
        i += 6;
        ++rewrites;
      }
      continue;
    }
    out.append(text.substr(i, 2));
    i += 2;
  }
  if (rewrites > 0) json = std::move(out);
  return rewrites;
}

}  // namespace loco
