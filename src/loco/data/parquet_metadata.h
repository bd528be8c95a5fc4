// What a Parquet file says about itself, for reading one string column (parquet_text.h): the footer (schema
// and row groups: where the column's chunks lie), each page's header, and a page's decompression. All of it
// comes from a file anyone may have written, so each count and size is checked against the file before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "loco/data/table_file.h"

namespace loco::data {

// parquet.thrift's numbers for what loco's reader meets.
namespace parquet {
inline constexpr int kByteArray = 6;                                       // Type
inline constexpr int kOptional = 1, kRepeated = 2;                         // FieldRepetitionType
inline constexpr int kDataPage = 0, kDictionaryPage = 2, kDataPageV2 = 3;  // PageType
inline constexpr int kPlain = 0, kPlainDictionary = 2, kDeltaLengthByteArray = 6, kDeltaByteArray = 7,
                     kRleDictionary = 8;                                    // Encoding
inline constexpr int kUncompressed = 0, kSnappy = 1, kGzip = 2, kZstd = 6, kLz4Raw = 7;  // CompressionCodec
}  // namespace parquet

// A page (compressed or not) or dictionary larger than this is refused: no writer makes one (parquet-rs and
// pyarrow write pages of about 1 MiB), and a stranger's header could otherwise ask for any size.
inline constexpr std::uint64_t kMaxParquetPageBytes = std::uint64_t{256} << 20;

// Where one row group's chunk of the column lies.
struct ColumnChunk {
  std::uint64_t begin = 0, length = 0;  // of its pages (from its dictionary page, where it has one) in the file
  std::int64_t codec = 0;
  std::uint64_t values = 0;
};

struct ParquetColumn {
  std::vector<ColumnChunk> chunks;  // one per row group, in order
  int max_definition = 0;           // 1 for an optional column: a row whose level is below it is null
};

// The column `problems.column` of the file whose footer (its Thrift-encoded FileMetaData) is `footer`: a
// top-level string column, required or optional. Errors: the column missing (naming the file's columns),
// not text, a group or a list; chunks in other files or past `file_size`; a footer that cannot be read.
ParquetColumn read_parquet_footer(std::string_view footer, std::uint64_t file_size, const TableFileProblems& problems);

struct PageHeader {
  std::int64_t type = -1;
  std::uint64_t uncompressed = 0, compressed = 0;
  std::uint64_t values = 0;
  std::int64_t encoding = -1;
  std::uint64_t definition_bytes = 0, repetition_bytes = 0;  // of a v2 page
  bool values_compressed = true;                             // of a v2 page
  std::size_t header_bytes = 0;                              // the header's own size
};

// The page header at the start of `bytes`; ThriftError when they do not hold one (ended_early: more bytes
// might).
PageHeader parse_page_header(std::string_view bytes);

// A page's `compressed` bytes with `codec`, which must decompress to exactly `size` bytes (at most
// kMaxParquetPageBytes).
std::string decompress_page(std::string compressed, std::int64_t codec, std::uint64_t size,
                            const TableFileProblems& problems);

}  // namespace loco::data
