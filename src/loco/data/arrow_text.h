// The text column of an Arrow IPC file, row by row: what Hugging Face datasets keeps in its cache and writes
// with save_to_disk (`data-00000-of-00001.arrow`), and Feather v2 files. Debian 12 has no Arrow library, so
// loco reads the format itself, only as far as a string column needs (docs/data.md):
//
//   - the stream format (what datasets writes: a schema message, then dictionary and record batch messages,
//     each a length, FlatBuffers metadata (arrow_metadata.h) and a body; an end-of-stream marker or the
//     file's end after the last) and the file format ("ARROW1", the messages, a footer that gives the schema
//     and where each record batch lies, "ARROW1"); lengths with and without the continuation marker that
//     Arrow 0.15 put in front of them;
//   - the column is a top-level Utf8, LargeUtf8 or Utf8View column: each record batch's validity bitmap
//     (which rows are null: they hold no document), offsets or views, and bytes of that column are read,
//     each buffer decompressed where the batch is compressed (LZ4 frames or zstd, block_decompress.h); other
//     columns' buffers and dictionary batches are skipped, never read.
//
// Memory is one record batch's text column (at most kMaxArrowColumnBytes, decompressed), whatever the file's
// size. Anything else (a dictionary-encoded column, big-endian data, a message or buffer that does not add
// up) is a DataError naming the file and what to do. Tested against files written by Apache Arrow's
// JavaScript implementation and by polars (tests/fixtures/arrow, tests/reference/make_arrow_fixtures.mjs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "loco/data/table_file.h"

namespace loco::data {

// A record batch whose text column (validity, offsets or views, and bytes together, decompressed) is larger
// than this is refused:
// datasets writes batches of 1000 rows (a few MB of web text; books: up to a few hundred MB), and a
// stranger's metadata could otherwise ask for any size.
inline constexpr std::uint64_t kMaxArrowColumnBytes = std::uint64_t{512} << 20;

// Opens `path` and reads its schema: DataError naming the file's columns when it has no `column`. Its
// file_bytes_read() counts the messages passed: the whole file once the last row is read.
std::unique_ptr<ColumnTextReader> open_arrow_text(const std::filesystem::path& path, const std::string& column);

}  // namespace loco::data
