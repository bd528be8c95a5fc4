// A corpus is UTF-8 text. What is not would be encoded as text all the same, silently: a UTF-16 or UTF-32 file
// as NULs between letters, a binary file (an image, a PDF, an archive, compressed data under a name without
// its extension) as noise, Windows-1252 or Latin-1 text under BPE with U+FFFD for every letter beyond ASCII. So the
// start of every corpus file is looked at before it is read (corpus_stream.h), and that of a .json file before its
// format is decided by its first byte (corpus_files.h).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace loco::data {

// How far into a file a NUL byte makes it binary (as Git looks).
inline constexpr std::size_t kBinaryTestBytes = 8000;

// DataError naming `path`, what it is and how to make text of it, when `start` (the file's first bytes, as
// decompressed; at least kBinaryTestBytes of them unless the file is shorter) begins with a UTF-16 or UTF-32
// byte-order mark or holds a NUL byte: named as one of the formats corpora come in (gzip, zstd, xz, bzip2,
// zip, tar, 7-Zip, Parquet, Arrow) where it is one.
void refuse_what_is_not_utf8_text(const std::filesystem::path& path, std::string_view start);

// DataError naming `path` and its iconv command when `start` (the file's first bytes, as decompressed, as many as
// were read: at least kBinaryTestBytes unless the file is shorter) holds a byte that is not UTF-8: text in an
// 8-bit encoding (no UTF-8 letter beyond ASCII among them), or stray bytes in UTF-8 text; the fix differs
// (converting UTF-8 from Windows-1252 would garble its letters). For text a BPE tokenizer reads: sentencepiece's
// normaliser turned each such byte into U+FFFD without a word; the byte tokenizer keeps them, and is not
// checked. `more_follow`: the file goes on after `start` (a character may be cut at its end).
void refuse_bytes_that_are_not_utf8(const std::filesystem::path& path, std::string_view start, bool more_follow);

// The same for `text` (whole characters) read further into `path`, past the start looked at above: a stray byte
// there reached sentencepiece as U+FFFD all the same. `place(i)` says where text's byte i lies in the file
// ("offset 81234", "offset 7 of row 12's text").
void refuse_stray_bytes(const std::filesystem::path& path, std::string_view text,
                        const std::function<std::string(std::size_t)>& place);

}  // namespace loco::data
