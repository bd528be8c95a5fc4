// Small text predicates shared by the corpus reader and tokenizer training.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace loco::data {

// True when `text` holds nothing but ASCII whitespace: such documents and lines carry no text.
inline bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

// JSON's whitespace (RFC 8259): what may stand between a JSON file's values.
inline constexpr std::string_view kJsonWhitespace = " \t\n\r";

// A byte of a file as a message shows it: 'c' for printable ASCII, else "byte 0xNN" (a lone byte of a UTF-8
// character, or a control character, would reach the terminal as it is).
inline std::string shown_byte(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte >= 0x20 && byte < 0x7F ? std::string{'\'', c, '\''} : fmt::format("byte 0x{:02X}", byte);
}

}  // namespace loco::data
