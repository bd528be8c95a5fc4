// A corpus is UTF-8 text. What is not would be encoded as text all the same, silently: a UTF-16 or UTF-32 file
// as NULs between letters, a binary file (an image, a PDF, an archive, compressed data under a name without
// its extension) as noise, Windows-1252 or Latin-1 text with U+FFFD for every letter beyond ASCII. So the start of
// every corpus file is looked at before it is read (corpus_stream.h), and that of a .json file before its format is
// decided by its first byte (corpus_files.h).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace loco::data {

// How far into a file a NUL byte makes it binary (as Git looks).
inline constexpr std::size_t kBinaryTestBytes = 8000;

// DataError naming `path`, what it is and how to make text of it, when `start` (the file's first bytes, as
// decompressed; at least kBinaryTestBytes of them unless the file is shorter) begins with a UTF-16 or UTF-32
// byte-order mark or holds a NUL byte (named as one of the formats corpora come in, gzip, zstd, xz, bzip2,
// zip, tar, 7-Zip, Parquet, Arrow, where it is one), or when its first kBinaryTestBytes hold a byte that is not
// UTF-8 (an 8-bit encoding, or stray bytes in UTF-8 text, each with its iconv command). Beyond them a file is
// not looked at before it is read.
void refuse_what_is_not_utf8_text(const std::filesystem::path& path, std::string_view start);

}  // namespace loco::data
