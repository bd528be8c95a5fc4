#include "loco/data/arrow_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include "loco/data/arrow_metadata.h"
#include "loco/data/block_decompress.h"
#include "loco/data/packed_integers.h"

namespace loco::data {

namespace fs = std::filesystem;

namespace {

// A message's metadata holds the schema (with datasets' features as JSON in its custom metadata: KBs) or
// a record batch's buffer list: a few KB, more for a table of thousands of columns.
constexpr std::uint64_t kMaxMetadataBytes = std::uint64_t{64} << 20;
constexpr std::string_view kFileMagic("ARROW1", 6);
constexpr std::uint32_t kContinuation = 0xFFFFFFFF;

// The reader of arrow_text.h.
class ArrowTextReader final : public ColumnTextReader {
 public:
  ArrowTextReader(const fs::path& path, const std::string& name) : problems{path, name, "Arrow"}, file(problems) {
    open();
  }

  bool next(std::string& text, std::uint64_t& row_number) override {
    for (;;) {
      while (batch_next == batch_rows) {
        const std::optional<ArrowMessage> message = finished ? std::nullopt : next_batch_message();
        if (!message) {
          finished = true;
          return false;
        }
        if (message->kind == ArrowMessage::Kind::record_batch) start_batch(*message);
      }
      const std::uint64_t i = batch_next++;
      ++row;
      if (!validity.empty() && ((static_cast<unsigned char>(validity[i / 8]) >> (i % 8)) & 1) == 0) continue;
      text_of(i, text);
      row_number = row;
      return true;
    }
  }

  std::uint64_t file_bytes_read() const override { return finished ? file.size() : passed; }

 private:
  const TableFileProblems problems;
  const PositionalFile file;
  std::uint64_t position = 0;     // of the next message
  std::uint64_t body_offset = 0;  // of the message read last
  std::uint64_t end = 0;          // of the messages: the file's end, or a file-format file's footer
  std::uint64_t passed = 0;       // the furthest message end reached, for progress
  bool finished = false;
  // A file-format file's record batches, where its footer says they begin (its stream may lack the schema,
  // which the footer holds); a stream-format file's messages are read in order instead.
  bool file_format = false;
  std::vector<std::uint64_t> batch_offsets;
  std::size_t next_batch = 0;
  ArrowColumn column;
  std::uint64_t row = 0;
  // The record batch at hand: its text column's buffers and the next of its rows.
  std::string validity;
  std::string offsets;            // or a view column's views
  std::vector<std::string> data;  // the bytes: one buffer, or a view column's data buffers
  std::uint64_t batch_rows = 0, batch_next = 0;

  DataError damaged(const std::string& what) const { return problems.damaged(what); }

  // The file format is "ARROW1", two bytes of padding, the stream, the footer, its length (4 bytes) and
  // "ARROW1" again; the stream format is the stream alone.
  void open() {
    const std::uint64_t size = file.size();
    end = size;
    if (size >= kFileMagic.size() && file.read_at(0, kFileMagic.size()) == kFileMagic) {
      if (size < 8 + 4 + kFileMagic.size()) throw damaged(fmt::format("{} bytes are too few for an Arrow file", size));
      const std::string tail = file.read_at(size - 10, 10);
      if (tail.substr(4) != kFileMagic) throw damaged("it begins with ARROW1 but does not end with it");
      const std::uint64_t footer = *read_le32(tail);
      if (footer > size - 8 - 10 || footer > kMaxMetadataBytes) {
        throw damaged(fmt::format("its footer claims {} bytes", footer));
      }
      end = size - 10 - footer;
      ArrowFooter parsed = parse_arrow_footer(file.read_at(end, footer), end, problems);
      column = parsed.column;
      batch_offsets = std::move(parsed.record_batches);
      file_format = true;
      passed = 8;
      return;
    }
    const std::optional<ArrowMessage> schema = next_message(nullptr);
    if (!schema) throw damaged("it holds no schema");
    column = schema->column;
  }

  // Reads the message at `position` and moves past it (its body unread); nullopt at the stream's end.
  std::optional<ArrowMessage> next_message(const ArrowColumn* schema) {
    if (position == end) return std::nullopt;
    // One read for the length and the continuation marker that may come before it.
    const std::string head = file.read_at(position, std::min<std::uint64_t>(8, end - position));
    std::uint64_t prefix = 4;
    std::optional<std::uint32_t> length = read_le32(head);
    if (length == kContinuation) {
      length = read_le32(std::string_view(head).substr(4));
      prefix = 8;
    }
    if (!length) throw damaged("it ends inside a message's length");
    if (*length == 0) {  // the end-of-stream marker
      position = end;
      return std::nullopt;
    }
    if (*length > end - position - prefix || *length > kMaxMetadataBytes) {
      throw damaged(fmt::format("a message at offset {} claims {} bytes of metadata", position, *length));
    }
    ArrowMessage message = parse_arrow_message(file.read_at(position + prefix, *length), schema, problems);
    const std::uint64_t body = position + prefix + *length;
    if (static_cast<std::uint64_t>(message.body_length) > end - body) {
      throw damaged(
          fmt::format("a message at offset {} claims a body of {} bytes, past the end", position, message.body_length));
    }
    body_offset = body;
    position = body + static_cast<std::uint64_t>(message.body_length);
    passed = std::max(passed, position);
    return message;
  }

  // The buffer `span` of the message body at body_offset, which is `body_length` bytes; decompressed with
  // `codec` where the record batch is compressed, each buffer alone: its decompressed length (8 bytes,
  // little-endian; -1: the bytes that follow are not compressed), then the compressed bytes. Its decompressed
  // size is taken from `budget`.
  std::string read_buffer(const ArrowBufferSpan& span, std::int64_t body_length, const std::optional<BlockCodec>& codec,
                          std::uint64_t& budget) {
    if (span.offset < 0 || span.length < 0 || span.offset > body_length || span.length > body_length - span.offset) {
      throw damaged(fmt::format("a buffer of column '{}' lies outside its record batch", problems.column));
    }
    std::string raw =
        file.read_at(body_offset + static_cast<std::uint64_t>(span.offset), static_cast<std::uint64_t>(span.length));
    if (codec && !raw.empty()) {
      if (raw.size() < 8)
        throw damaged(fmt::format("a compressed buffer of column '{}' has no length", problems.column));
      const auto length = static_cast<std::int64_t>(*read_le64(raw));
      if (length == -1) {
        raw.erase(0, 8);
      } else if (length < 0 || static_cast<std::uint64_t>(length) > budget) {
        throw too_large(static_cast<std::uint64_t>(length));
      } else {
        raw = decompress_block(*codec, std::string_view(raw).substr(8), static_cast<std::uint64_t>(length), "a buffer",
                               problems);
      }
    }
    if (raw.size() > budget) throw too_large(raw.size());
    budget -= raw.size();
    return raw;
  }

  DataError too_large(std::uint64_t bytes) const {
    return damaged(
        fmt::format("a record batch's column '{}' needs more than the {} MiB loco reads at once ({} "
                    "bytes in one buffer; write smaller record batches: pyarrow's max_chunksize)",
                    problems.column, kMaxArrowColumnBytes >> 20, bytes));
  }

  // Makes the record batch `message` the one at hand.
  void start_batch(const ArrowMessage& message) {
    const ArrowRecordBatch& batch = message.batch;
    if (batch.column_rows != batch.rows || batch.rows < 0 || batch.column_nulls < 0 ||
        batch.column_nulls > batch.rows) {
      throw damaged(fmt::format("a record batch of {} rows has {} of column '{}', {} of them null", batch.rows,
                                batch.column_rows, problems.column, batch.column_nulls));
    }
    const auto rows = static_cast<std::uint64_t>(batch.rows);
    const bool views = column.layout == ArrowColumn::Layout::utf8_view;
    const std::uint64_t width = views ? 16 : column.layout == ArrowColumn::Layout::large_utf8 ? 8 : 4;
    if (rows >= kMaxArrowColumnBytes / width) {  // more rows than offsets or views fit in what loco reads
      throw damaged(fmt::format("a record batch claims {} rows, more than {} MiB of {} hold", rows,
                                kMaxArrowColumnBytes >> 20, views ? "views" : "offsets"));
    }
    const std::uint64_t validity_bytes = batch.column_nulls > 0 ? (rows + 7) / 8 : 0;
    const std::uint64_t offset_bytes = rows > 0 ? (rows + (views ? 0 : 1)) * width : 0;
    std::uint64_t budget = kMaxArrowColumnBytes;
    const std::vector<ArrowBufferSpan>& spans = batch.buffers;
    validity = validity_bytes > 0 ? read_buffer(spans[0], message.body_length, batch.codec, budget) : std::string();
    offsets = read_buffer(spans[1], message.body_length, batch.codec, budget);
    data.clear();
    for (std::size_t b = 2; b < spans.size(); ++b)
      data.push_back(read_buffer(spans[b], message.body_length, batch.codec, budget));
    if (validity.size() < validity_bytes || offsets.size() < offset_bytes) {
      throw damaged(fmt::format("a record batch of {} rows has {} bytes of validity bits and {} of {} in column '{}'",
                                rows, validity.size(), offsets.size(), views ? "views" : "offsets", problems.column));
    }
    batch_rows = rows;
    batch_next = 0;
  }

  std::uint64_t offset_at(std::uint64_t index) const {
    const std::string_view all = offsets;
    const std::int64_t value = column.layout == ArrowColumn::Layout::large_utf8
                                   ? static_cast<std::int64_t>(*read_le64(all.substr(index * 8, 8)))
                                   : static_cast<std::int32_t>(*read_le32(all.substr(index * 4, 4)));
    if (value < 0 || static_cast<std::uint64_t>(value) > data[0].size()) {
      throw damaged(fmt::format("an offset of column '{}' lies outside its bytes", problems.column));
    }
    return static_cast<std::uint64_t>(value);
  }

  // Row `i`'s text: between its offset and the next, or where its view says (in the view itself when it is at
  // most 12 bytes; else at an offset in one of the data buffers).
  void text_of(std::uint64_t i, std::string& text) const {
    if (column.layout != ArrowColumn::Layout::utf8_view) {
      const std::uint64_t begin = offset_at(i), stop = offset_at(i + 1);
      if (stop < begin) throw damaged(fmt::format("the offsets of column '{}' decrease", problems.column));
      text.assign(data[0], static_cast<std::size_t>(begin), static_cast<std::size_t>(stop - begin));
      return;
    }
    const std::string_view view = std::string_view(offsets).substr(i * 16, 16);
    const auto field = [&](std::size_t at) { return static_cast<std::int32_t>(*read_le32(view.substr(at, 4))); };
    const std::int32_t length = field(0);
    if (length >= 0 && length <= 12) {
      text.assign(view.data() + 4, static_cast<std::size_t>(length));
      return;
    }
    const std::int32_t buffer = field(8), offset = field(12);
    if (length < 0 || buffer < 0 || static_cast<std::size_t>(buffer) >= data.size() || offset < 0 ||
        static_cast<std::uint64_t>(offset) + static_cast<std::uint64_t>(length) > data[buffer].size()) {
      throw damaged(fmt::format("a view of column '{}' lies outside its buffers", problems.column));
    }
    text.assign(data[buffer], static_cast<std::size_t>(offset), static_cast<std::size_t>(length));
  }

  // The next message that may be a record batch: the file format's next by its footer, the stream's next.
  std::optional<ArrowMessage> next_batch_message() {
    if (!file_format) return next_message(&column);
    if (next_batch == batch_offsets.size()) return std::nullopt;
    // Each record batch after the one before, as writers place them: a footer naming one batch many times
    // cannot make loco read it many times.
    if (next_batch > 0 && batch_offsets[next_batch] < position) {
      throw damaged(fmt::format("its footer places a record batch at offset {}, inside the message before",
                                batch_offsets[next_batch]));
    }
    position = batch_offsets[next_batch++];
    std::optional<ArrowMessage> message = next_message(&column);
    if (!message || message->kind != ArrowMessage::Kind::record_batch) {
      throw damaged(fmt::format("its footer places a record batch at offset {}, where there is none",
                                batch_offsets[next_batch - 1]));
    }
    return message;
  }
};

}  // namespace

std::unique_ptr<ColumnTextReader> open_arrow_text(const fs::path& path, const std::string& column) {
  return std::make_unique<ArrowTextReader>(path, column);
}

}  // namespace loco::data
