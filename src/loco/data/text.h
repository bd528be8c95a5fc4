// Small text predicates shared by the corpus reader and tokenizer training.
#pragma once

#include <algorithm>
#include <cctype>
#include <string_view>

namespace loco::data {

// True when `text` holds nothing but ASCII whitespace: such documents and lines carry no text.
inline bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

// JSON's whitespace (RFC 8259): what may stand between a JSON file's values.
inline constexpr std::string_view kJsonWhitespace = " \t\n\r";

}  // namespace loco::data
