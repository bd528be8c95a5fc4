// What an Arrow IPC message says about itself, for reading one string column (arrow_text.h). A message's
// metadata is a FlatBuffers table (Arrow's Message.fbs and Schema.fbs), read here through FlatBuffers' own
// verifier: every offset, vector and string is checked to lie inside the metadata before it is used, the
// nesting and the number of tables are bounded, since anyone may have written the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "loco/data/block_decompress.h"
#include "loco/data/table_file.h"

namespace loco::data {

// Where the text column lies in each record batch, found once from the schema: record batches list the
// field nodes (one per field, children after their parent) and buffers of every column in schema order, so
// the column's come after those of the columns before it.
struct ArrowColumn {
  std::size_t node = 0;                      // index of its field node
  std::size_t first_buffer = 0;              // index of its validity buffer, with no view columns before it
  std::size_t view_fields_before = 0;        // string or binary view fields before it: each adds its record batch's
                                             // count of data buffers (variadicBufferCounts) to first_buffer
  // How its rows are held: Utf8 (32-bit offsets into one buffer of bytes), LargeUtf8 (64-bit offsets),
  // Utf8View (16 bytes a row: a short text itself, or where a longer one lies in one of several buffers).
  enum class Layout { utf8, large_utf8, utf8_view } layout = Layout::utf8;
  std::size_t nodes = 0, fixed_buffers = 0;  // of the whole schema (buffers without the variadic ones)
  std::size_t view_fields = 0;               // in the whole schema
};

struct ArrowBufferSpan {
  std::int64_t offset = 0, length = 0;  // in the message's body
};

struct ArrowRecordBatch {
  std::int64_t rows = 0;
  std::int64_t column_rows = 0, column_nulls = 0;  // of the text column's field node
  // The text column's buffers: validity bits, offsets (or views), then its bytes (one buffer, or a view
  // column's data buffers).
  std::vector<ArrowBufferSpan> buffers;
  std::optional<BlockCodec> codec;  // each buffer compressed alone (LZ4 frames or zstd), or none
};

// One message's metadata: which kind, how long its body is, and what loco needs of it.
struct ArrowMessage {
  enum class Kind { schema, dictionary_batch, record_batch } kind = Kind::schema;
  std::int64_t body_length = 0;
  ArrowColumn column;      // of a schema
  ArrowRecordBatch batch;  // of a record batch
};

// Parses one message's metadata (the FlatBuffers bytes after its length). `schema` is the file's schema, for
// a record batch (nullptr for the first message, which must be the schema). Errors (`problems`): metadata
// that does not verify or is not a message of Arrow 0.15 or later (damaged); the column missing (naming the
// file's columns), not a string column, or dictionary-encoded; big-endian data, tensors (unsupported); a
// record batch whose fields or buffers do not match the schema (damaged).
ArrowMessage parse_arrow_message(std::string_view metadata, const ArrowColumn* schema,
                                 const TableFileProblems& problems);

// The footer of the file format: its schema (where the writer may have left it out of the stream), and
// where each record batch's message begins in the file.
struct ArrowFooter {
  ArrowColumn column;
  std::vector<std::uint64_t> record_batches;
};

// Parses the file format's footer (the FlatBuffers bytes before its length and the final "ARROW1"); errors as
// parse_arrow_message's, and a record batch said to begin at or past `messages_end` (damaged).
ArrowFooter parse_arrow_footer(std::string_view footer, std::uint64_t messages_end, const TableFileProblems& problems);

}  // namespace loco::data
