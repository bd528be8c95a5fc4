#include "loco/util/utf8.h"

#include <fmt/format.h>

namespace loco {

namespace {

// The sequence at byte `i`: its length and whether it is well-formed; an ill-formed one's length is that of its
// maximal subpart (the lead byte and the continuation bytes that fit it, at least 1), what one U+FFFD replaces
// (Unicode's "substitution of maximal subparts", as Python's errors="replace" and WHATWG's decoder do).
struct Sequence {
  std::size_t length = 1;
  bool well_formed = true;
};

Sequence sequence_at(std::string_view bytes, std::size_t i) {
  const unsigned char lead = static_cast<unsigned char>(bytes[i]);
  if (lead < 0x80) return {1, true};
  // The length a lead byte announces, and the range its first continuation byte must lie in (RFC 3629 table
  // 3-7: narrower after E0, ED, F0 and F4, which would otherwise start overlong forms, surrogates or code points
  // past U+10FFFF).
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {1, false};
  }
  for (std::size_t k = 1; k < length; ++k) {
    if (i + k >= bytes.size()) return {k, false};
    const auto next = static_cast<unsigned char>(bytes[i + k]);
    if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xBF)) return {k, false};
  }
  return {length, true};
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size();) {
    const Sequence sequence = sequence_at(bytes, i);
    if (!sequence.well_formed) return i;
    i += sequence.length;
  }
  return std::nullopt;
}

Utf8Scan scan_utf8(std::string_view bytes, bool more_follow) {
  Utf8Scan scan;
  for (std::size_t i = 0; i < bytes.size();) {
    const Sequence sequence = sequence_at(bytes, i);
    if (!sequence.well_formed) {
      // Cut by the end of what was read, not ill-formed: every byte up to the end fits the sequence.
      if (more_follow && i + sequence.length == bytes.size() && sequence.length > 1) break;
      if (more_follow && i + 1 == bytes.size() && static_cast<unsigned char>(bytes[i]) >= 0xC2 &&
          static_cast<unsigned char>(bytes[i]) <= 0xF4) {
        break;
      }
      if (!scan.first_invalid) scan.first_invalid = i;
    } else if (sequence.length > 1) {
      scan.multibyte = true;
    }
    if (scan.first_invalid && scan.multibyte) break;
    i += sequence.length;
  }
  return scan;
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Sequence sequence = sequence_at(bytes, i);
    if (sequence.well_formed) {
      out.append(bytes.substr(i, sequence.length));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += sequence.length;
  }
  return out;
}

std::string utf8_prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t end = max_bytes;
  // Back to the start of the character at `end` (at most 3 continuation bytes precede it in UTF-8).
  for (std::size_t back = 0; back < 3 && end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80; ++back) {
    --end;
  }
  return std::string(text.substr(0, end));
}

std::string escape_invalid_utf8(std::string_view bytes) {
  std::string out;
  while (const auto bad = first_invalid_utf8(bytes)) {
    out.append(bytes.substr(0, *bad));
    out += fmt::format("\\x{:02X}", static_cast<unsigned char>(bytes[*bad]));
    bytes.remove_prefix(*bad + 1);
  }
  return out.append(bytes);
}

std::string escape_control_characters(std::string_view text, bool keep_line_ends) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool control = byte < 0x20 || byte == 0x7F;
    if (control && !(keep_line_ends && (c == '\n' || c == '\t'))) {
      out += fmt::format("\\x{:02X}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

std::string quoted_bytes(std::string_view bytes, std::size_t max_bytes) {
  return escape_control_characters(escape_invalid_utf8(utf8_prefix(bytes, max_bytes)), /*keep_line_ends=*/false);
}

}  // namespace loco
