#include "loco/data/parquet_text.h"

#include <fmt/format.h>

#include <optional>
#include <string_view>
#include <vector>

#include "loco/data/packed_integers.h"
#include "loco/data/parquet_encodings.h"
#include "loco/data/parquet_metadata.h"
#include "loco/data/thrift_compact.h"
#include "loco/util/error.h"

namespace loco::data {

namespace fs = std::filesystem;

using namespace parquet;

namespace {

// The footer of a file holds its whole schema and every row group's metadata: a few KB to a few MB.
constexpr std::uint64_t kMaxFooterBytes = std::uint64_t{64} << 20;
// A page header is a few dozen bytes, more with a string column's statistics (min and max values).
constexpr std::size_t kFirstHeaderWindow = 4 << 10;
constexpr std::size_t kMaxHeaderBytes = 16 << 20;
// Writers keep a dictionary to about 1 MiB (pyarrow, parquet-rs: a few hundred thousand values); past 2^24 a
// dictionary of empty strings would cost gigabytes of views.
constexpr std::uint64_t kMaxDictionaryValues = std::uint64_t{1} << 24;
// Writers end a page at 20,000 rows (pyarrow, parquet-rs, parquet-mr). A page's rows cost time even where they
// hold nothing (nulls, empty strings: a few bytes can claim millions), so a page may have at most 2^24.
constexpr std::uint64_t kMaxPageValues = std::uint64_t{1} << 24;

// The PLAIN value at the start of `values` (a 4-byte length, then the bytes); `values` moves past it.
std::optional<std::string_view> next_plain(std::string_view& values) {
  const std::optional<std::uint32_t> length = read_le32(values);
  if (!length || *length > values.size() - 4) return std::nullopt;
  const std::string_view value = values.substr(4, *length);
  values.remove_prefix(4 + *length);
  return value;
}

// The reader of parquet_text.h.
class ParquetTextReader final : public ColumnTextReader {
 public:
  ParquetTextReader(const fs::path& path, const std::string& name)
      : problems{path, name, "Parquet"}, file(problems), file_size(file.size()) {
    open();
  }

  bool next(std::string& text, std::uint64_t& row_number) override {
    for (;;) {
      if (page_values_left == 0 && !next_data_page()) {
        finished = true;
        return false;
      }
      --page_values_left;
      ++row;
      if (definitions) {
        std::uint32_t level = 0;
        if (!definitions->next(level)) throw damaged("a page holds fewer definition levels than values");
        if (level != static_cast<std::uint32_t>(column.max_definition)) {  // a null row, maybe the first of a run
          const std::uint64_t more = definitions->skip_repeats(page_values_left);
          page_values_left -= more;
          row += more;
          continue;
        }
      }
      next_value(text);
      row_number = row;
      return true;
    }
  }

  std::uint64_t file_bytes_read() const override { return finished ? file_size : std::min(consumed, file_size); }

 private:
  const TableFileProblems problems;
  const PositionalFile file;
  const std::uint64_t file_size;
  std::uint64_t consumed = 0;  // the footer and the pages read, for progress
  bool finished = false;
  ParquetColumn column;

  // Where the reading is.
  std::size_t chunk = 0;
  std::uint64_t chunk_offset = 0, chunk_values = 0;
  std::string dictionary_page;               // the chunk's dictionary page, decompressed
  std::vector<std::string_view> dictionary;  // its values
  bool has_dictionary = false;
  std::uint64_t row = 0;
  // The data page at hand.
  std::string page;
  std::uint64_t page_values_left = 0;
  std::optional<HybridDecoder> definitions;
  // How the page's values are read, by its encoding: PLAIN from `bytes`; dictionary indices; DELTA_LENGTH
  // lengths then `bytes`; DELTA_BYTE_ARRAY prefixes (of the `previous` value), suffix lengths, then `bytes`.
  enum class Values { plain, dictionary, delta_length, delta_strings } values = Values::plain;
  std::string_view bytes;
  std::optional<HybridDecoder> indices;
  std::optional<DeltaDecoder> lengths, prefixes;
  std::string previous;

  DataError damaged(const std::string& what) const { return problems.damaged(what); }

  std::string read_at(std::uint64_t offset, std::uint64_t size) const { return file.read_at(offset, size); }

  // The file's layout: "PAR1", the pages, the footer, the footer's length (4 bytes, little-endian), "PAR1".
  void open() {
    if (file_size < 12) throw damaged(fmt::format("{} bytes are too few for a Parquet file", file_size));
    const std::string tail = read_at(file_size - 8, 8);
    if (read_at(0, 4) != "PAR1" || tail.substr(4) != "PAR1") {
      throw damaged("it does not begin and end with Parquet's mark PAR1");
    }
    const std::uint64_t footer_size = *read_le32(tail);
    if (footer_size > file_size - 12 || footer_size > kMaxFooterBytes) {
      throw damaged(fmt::format("its footer claims {} bytes", footer_size));
    }
    column = read_parquet_footer(read_at(file_size - 8 - footer_size, footer_size), file_size, problems);
    consumed = 12 + footer_size;
  }

  // The header of the page at `offset`, read through a window of the file that grows until it holds it (at
  // most `limit`, what remains of the column chunk).
  PageHeader read_page_header(std::uint64_t offset, std::uint64_t limit) {
    for (std::size_t window = kFirstHeaderWindow;; window *= 8) {
      const std::uint64_t size = std::min<std::uint64_t>(window, limit);
      try {
        return parse_page_header(read_at(offset, size));
      } catch (const ThriftError& e) {
        if (!e.ended_early() || size == limit || window >= kMaxHeaderBytes) {
          throw damaged(fmt::format("a page header at offset {} cannot be read ({})", offset, e.what()));
        }
      }
    }
  }

  // The bytes of a page's body, as decompressed: all of it, or for a v2 page its levels (never compressed)
  // followed by its values.
  std::string page_body(const PageHeader& h, std::uint64_t offset, std::int64_t codec) {
    if (h.compressed > kMaxParquetPageBytes) {
      throw damaged(fmt::format("a page claims {} bytes, more than the {} MiB loco reads", h.compressed,
                                kMaxParquetPageBytes >> 20));
    }
    std::string raw = read_at(offset, h.compressed);
    if (h.type != kDataPageV2) return decompress_page(std::move(raw), codec, h.uncompressed, problems);
    const std::uint64_t levels = h.definition_bytes + h.repetition_bytes;
    if (levels > raw.size() || levels > h.uncompressed) throw damaged("a page's levels are larger than the page");
    std::string body = raw.substr(0, static_cast<std::size_t>(levels));
    body += decompress_page(raw.substr(static_cast<std::size_t>(levels)), h.values_compressed ? codec : kUncompressed,
                            h.uncompressed - levels, problems);
    return body;
  }

  void read_dictionary_page(const PageHeader& h, std::uint64_t offset, std::int64_t codec) {
    if (h.encoding != kPlain && h.encoding != kPlainDictionary) {
      throw problems.unsupported(fmt::format("a dictionary page has the encoding {}", h.encoding));
    }
    if (h.values > kMaxDictionaryValues) {
      throw damaged(fmt::format("a dictionary claims {} values, more than any writer makes", h.values));
    }
    dictionary.clear();
    dictionary_page = page_body(h, offset, codec);
    std::string_view rest = dictionary_page;
    for (std::uint64_t i = 0; i < h.values; ++i) {
      const auto value = next_plain(rest);
      if (!value) throw damaged("a dictionary page holds fewer values than it says");
      dictionary.push_back(*value);
    }
    has_dictionary = true;
  }

  // Makes the data page at `offset` the one at hand: its definition levels and the decoder of its values.
  void start_data_page(const PageHeader& h, std::uint64_t offset, std::int64_t codec) {
    page = page_body(h, offset, codec);
    std::string_view rest = page;
    definitions.reset();
    if (h.type == kDataPageV2) {  // levels of known sizes: repetition (none for a flat column), definition
      const std::string_view levels =
          rest.substr(static_cast<std::size_t>(h.repetition_bytes), static_cast<std::size_t>(h.definition_bytes));
      rest.remove_prefix(static_cast<std::size_t>(h.repetition_bytes + h.definition_bytes));
      if (column.max_definition > 0)
        definitions.emplace(levels, bit_width_of(static_cast<std::uint32_t>(column.max_definition)));
    } else if (column.max_definition > 0) {  // v1: the definition levels' length, then the levels
      const std::optional<std::uint32_t> length = read_le32(rest);
      if (!length || *length > rest.size() - 4) throw damaged("a page's definition levels run past the page");
      definitions.emplace(rest.substr(4, *length), bit_width_of(static_cast<std::uint32_t>(column.max_definition)));
      rest.remove_prefix(4 + *length);
    }
    indices.reset();
    lengths.reset();
    prefixes.reset();
    previous.clear();
    bytes = rest;
    if (h.encoding == kPlain) {
      values = Values::plain;
    } else if (h.encoding == kPlainDictionary || h.encoding == kRleDictionary) {
      if (!has_dictionary) throw damaged("a page refers to a dictionary its column chunk does not have");
      if (rest.empty()) throw damaged("a dictionary-encoded page has no bit width");
      const int width = static_cast<std::uint8_t>(rest[0]);
      if (width > 32) throw damaged(fmt::format("dictionary indices of {} bits", width));
      indices.emplace(rest.substr(1), width);
      values = Values::dictionary;
    } else if (h.encoding == kDeltaLengthByteArray) {
      lengths.emplace(delta_block(bytes, h.values));
      values = Values::delta_length;
    } else if (h.encoding == kDeltaByteArray) {
      prefixes.emplace(delta_block(bytes, h.values));
      lengths.emplace(delta_block(bytes, h.values));
      values = Values::delta_strings;
    } else {
      throw problems.unsupported(fmt::format("column '{}' is written with encoding {}, which strings do not have",
                                             problems.column, h.encoding));
    }
    page_values_left = h.values;
  }

  // Reads pages of the chunk at hand until a data page with values; false after the last chunk.
  bool next_data_page() {
    for (;;) {
      if (chunk >= column.chunks.size()) return false;
      const ColumnChunk& c = column.chunks[chunk];
      if (chunk_values >= c.values || chunk_offset >= c.length) {
        if (chunk_values < c.values) {
          throw damaged(fmt::format("a row group holds fewer values of '{}' than it says", problems.column));
        }
        ++chunk;
        chunk_offset = chunk_values = 0;
        dictionary.clear();
        dictionary_page.clear();
        has_dictionary = false;
        continue;
      }
      const std::uint64_t at = c.begin + chunk_offset;
      const PageHeader h = read_page_header(at, c.length - chunk_offset);
      if (h.compressed > c.length - chunk_offset - h.header_bytes) throw damaged("a page runs past its column chunk");
      chunk_offset += h.header_bytes + h.compressed;
      consumed += h.header_bytes + h.compressed;
      if (h.type == kDictionaryPage) {
        read_dictionary_page(h, at + h.header_bytes, c.codec);
      } else if (h.type == kDataPage || h.type == kDataPageV2) {  // else an index page (type 1)
        if (h.values > c.values - chunk_values) throw damaged("a page holds more values than its row group");
        if (h.values > kMaxPageValues) {
          throw damaged(
              fmt::format("a page claims {} rows, more than the {} any writer puts in one", h.values, kMaxPageValues));
        }
        chunk_values += h.values;
        start_data_page(h, at + h.header_bytes, c.codec);
        if (page_values_left > 0) return true;
      }
    }
  }

  // A DELTA_BINARY_PACKED block at the start of `rest` of at most `most` integers; `rest` moves past it.
  DeltaDecoder delta_block(std::string_view& rest, std::uint64_t most) {
    DeltaDecoder decoder(rest);
    if (!decoder.valid() || decoder.count() > most) throw damaged("a page's delta-encoded lengths do not add up");
    const std::optional<std::size_t> end = decoder.end();
    if (!end) throw damaged("a page's delta-encoded lengths run past the page");
    rest.remove_prefix(*end);
    return decoder;
  }

  // The next non-null value of the page at hand, by its encoding.
  void next_value(std::string& text) {
    const auto length_of = [&](DeltaDecoder& decoder, std::uint64_t most) {
      const std::optional<std::int64_t> length = decoder.next();
      if (!length || *length < 0 || static_cast<std::uint64_t>(*length) > most) {
        throw damaged("a page's delta-encoded lengths do not match its values");
      }
      return static_cast<std::size_t>(*length);
    };
    switch (values) {
      case Values::plain: {
        const auto value = next_plain(bytes);
        if (!value) throw damaged("a page holds fewer values than it says");
        text.assign(value->data(), value->size());
        return;
      }
      case Values::dictionary: {
        std::uint32_t index = 0;
        if (!indices->next(index)) throw damaged("a page holds fewer dictionary indices than values");
        if (index >= dictionary.size()) throw damaged("a dictionary index past the dictionary's end");
        text.assign(dictionary[index].data(), dictionary[index].size());
        return;
      }
      case Values::delta_length: {
        const std::size_t length = length_of(*lengths, bytes.size());
        text.assign(bytes.data(), length);
        bytes.remove_prefix(length);
        return;
      }
      case Values::delta_strings: {
        const std::size_t prefix = length_of(*prefixes, previous.size());
        const std::size_t suffix = length_of(*lengths, bytes.size());
        previous.resize(prefix);
        previous.append(bytes.data(), suffix);
        bytes.remove_prefix(suffix);
        text = previous;
        return;
      }
    }
  }
};

}  // namespace

std::unique_ptr<ColumnTextReader> open_parquet_text(const fs::path& path, const std::string& column) {
  return std::make_unique<ParquetTextReader>(path, column);
}

}  // namespace loco::data
