// Whether bytes are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF). TOML files must be UTF-8, and toml11 3.7.1 reads past its buffer when a literal string holds
// an invalid sequence (found by tests/fuzz/config_fuzzer.cpp), so configs are checked before it sees them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace loco {

// The offset of the first byte that does not start or continue a well-formed sequence; nullopt when
// every byte does.
std::optional<std::size_t> first_invalid_utf8(std::string_view bytes);

// What one pass over `bytes` found: the offset of the first byte that does not start or continue a well-formed
// sequence, and whether any well-formed character of more than one byte is among them. `bytes` that are the
// start of a longer text (`more_follow`) may end inside a character: that last part counts as neither.
struct Utf8Scan {
  std::optional<std::size_t> first_invalid;
  bool multibyte = false;
};
Utf8Scan scan_utf8(std::string_view bytes, bool more_follow);

// `bytes` with each ill-formed sequence (its maximal subpart) replaced by U+FFFD, as Python's errors="replace"
// decodes: text for a terminal or a JSON document, from bytes that need not be UTF-8 (a byte tokenizer's).
std::string replace_invalid_utf8(std::string_view bytes);

// The longest prefix of `text` of at most `max_bytes` that does not end inside a character. Text kept from a peer or a file
// for display is cut with it: a cut inside a character makes the whole JSON document it goes into
// unwritable (nlohmann::json::dump refuses invalid UTF-8).
std::string utf8_prefix(std::string_view text, std::size_t max_bytes);

// `bytes` with each byte that is not part of a well-formed sequence written as \xNN, the rest as it is: a
// library's message that quotes a file's bytes, made printable and fit for JSON.
std::string escape_invalid_utf8(std::string_view bytes);

// `text` with each control character (C0 and DEL) written as \xNN, but for line ends and tabs where
// `keep_line_ends`: a file name or a quoted byte shown in a message can then forge no line of its own and move
// no cursor of the terminal (an ESC sequence in a corpus file's name reached it as it was).
std::string escape_control_characters(std::string_view text, bool keep_line_ends);

// At most the first `max_bytes` of `bytes` (a peer's answer, a file's), fit to quote in a one-line message: cut
// where no character is cut, and each byte that is not UTF-8 and each control character written as \xNN.
std::string quoted_bytes(std::string_view bytes, std::size_t max_bytes);

}  // namespace loco
