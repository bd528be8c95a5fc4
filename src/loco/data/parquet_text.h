// The text column of a Parquet file, row by row: what Hugging Face datasets and most large web corpora
// (FineWeb, C4's conversions) ship. Debian 12 has no Parquet library (Arrow is not packaged), so loco reads
// the format itself, only as far as a string column needs (docs/data.md):
//
//   - the footer gives the schema and each row group's chunk of the column (parquet_metadata.h, in Thrift's
//     compact protocol: thrift_compact.h); the column is a top-level string (BYTE_ARRAY) column, required or
//     optional;
//   - a chunk's pages are read one at a time (this file): an optional dictionary page, then data pages (v1 or
//     v2), each uncompressed or compressed with snappy, gzip, zstd or LZ4_RAW (block_decompress.h); values PLAIN,
//     dictionary indices, DELTA_LENGTH_BYTE_ARRAY or DELTA_BYTE_ARRAY (parquet_encodings.h); definition levels tell the
//     null rows, which hold no document.
//
// Memory is one page and the chunk's dictionary (each at most kMaxParquetPageBytes), whatever the file's size.
// Anything else (a nested or repeated column, another encoding or codec, a page or footer that does not add
// up) is a DataError naming the file and what to do. Tested against files written by parquet-rs
// (tests/fixtures/parquet, tests/reference/make_parquet_fixtures.mjs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "loco/data/table_file.h"

namespace loco::data {

// Opens `path` and finds `column` in its schema (DataError naming the columns there when it has none such). Its
// file_bytes_read() counts its footer and the column's pages: the whole file once the last row is read.
std::unique_ptr<ColumnTextReader> open_parquet_text(const std::filesystem::path& path, const std::string& column);

}  // namespace loco::data
