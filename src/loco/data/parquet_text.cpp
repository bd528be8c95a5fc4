#include "loco/data/parquet_text.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#if LOCO_HAVE_SNAPPY
#include <snappy-c.h>
#endif

#include "loco/data/thrift_compact.h"
#include "loco/util/error.h"

namespace loco::data {

namespace fs = std::filesystem;

namespace {

// parquet.thrift's numbers for what this reader meets.
constexpr int kByteArray = 6;                                    // Type
constexpr int kOptional = 1, kRepeated = 2;                      // FieldRepetitionType
constexpr int kDataPage = 0, kDictionaryPage = 2, kDataPageV2 = 3;  // PageType
constexpr int kPlain = 0, kPlainDictionary = 2, kDeltaLengthByteArray = 6, kDeltaByteArray = 7,
              kRleDictionary = 8;  // Encoding
constexpr int kUncompressed = 0, kSnappy = 1, kGzip = 2, kZstd = 6;  // CompressionCodec

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

const char* codec_name(std::int64_t codec) {
  switch (codec) {
    case 3:
      return "LZO";
    case 4:
      return "BROTLI";
    case 5:
      return "LZ4 (Hadoop framing)";
    case 7:
      return "LZ4_RAW";
    default:
      return "an unknown codec";
  }
}

// Bits `width` wide from `bit` on in `data`, the lowest bit first (Parquet's bit packing).
std::uint64_t unpack_bits(std::string_view data, std::uint64_t bit, int width) {
  std::uint64_t value = 0;
  for (int b = 0; b < width; ++b, ++bit) {
    value |= static_cast<std::uint64_t>((static_cast<std::uint8_t>(data[static_cast<std::size_t>(bit / 8)]) >> (bit % 8)) & 1)
             << b;
  }
  return value;
}

// The values of Parquet's RLE / bit-packing hybrid (definition levels, dictionary indices), one at a time.
// Runs: a varint header; its low bit 1: (header >> 1) groups of 8 values of `bit_width` bits, packed from
// the lowest bit; 0: (header >> 1) repeats of one value in whole bytes.
class HybridDecoder {
 public:
  HybridDecoder(std::string_view data, int bit_width) : data_(data), bit_width_(bit_width) {}

  // The next value; false where the data ends.
  bool next(std::uint32_t& value) {
    while (repeats_left_ == 0 && packed_left_ == 0) {
      if (position_ >= data_.size()) return false;
      std::uint64_t header = 0;
      for (int shift = 0;; shift += 7) {
        if (position_ >= data_.size() || shift > 63) return false;
        const auto byte = static_cast<std::uint8_t>(data_[position_++]);
        header |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
        if ((byte & 0x80) == 0) break;
      }
      if (header & 1) {
        const std::uint64_t groups = header >> 1;
        const std::uint64_t bytes = groups * static_cast<std::uint64_t>(bit_width_);
        if (groups > data_.size() || bytes > data_.size() - position_) return false;
        packed_begin_ = position_;
        packed_left_ = groups * 8;
        packed_index_ = 0;
        position_ += static_cast<std::size_t>(bytes);
      } else {
        const std::size_t width = static_cast<std::size_t>((bit_width_ + 7) / 8);
        if (width > data_.size() - position_) return false;
        repeat_value_ = 0;
        for (std::size_t i = 0; i < width; ++i) {
          repeat_value_ |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(data_[position_ + i])) << (8 * i);
        }
        position_ += width;
        repeats_left_ = header >> 1;
      }
    }
    if (repeats_left_ > 0) {
      --repeats_left_;
      value = repeat_value_;
      return true;
    }
    value = static_cast<std::uint32_t>(
        unpack_bits(data_.substr(packed_begin_), packed_index_ * static_cast<std::uint64_t>(bit_width_), bit_width_));
    ++packed_index_;
    --packed_left_;
    return true;
  }

  // After next gave a value of a run of repeats: takes up to `limit` more of them at once (how many), so that
  // a run of a million null rows costs one step.
  std::uint64_t skip_repeats(std::uint64_t limit) {
    const std::uint64_t taken = std::min(repeats_left_, limit);
    repeats_left_ -= taken;
    return taken;
  }

 private:
  std::string_view data_;
  int bit_width_;
  std::size_t position_ = 0;
  std::uint64_t repeats_left_ = 0;
  std::uint32_t repeat_value_ = 0;
  std::size_t packed_begin_ = 0;
  std::uint64_t packed_left_ = 0, packed_index_ = 0;
};

// The integers of Parquet's DELTA_BINARY_PACKED encoding, one at a time: a header (values per block,
// miniblocks per block, the count, the first value), then blocks of a minimum delta, one bit width per
// miniblock and the miniblocks' deltas above the minimum, bit-packed. The lengths of DELTA_LENGTH_BYTE_ARRAY
// and the prefix and suffix lengths of DELTA_BYTE_ARRAY are written so. std::nullopt from next where the data
// does not add up.
class DeltaDecoder {
 public:
  explicit DeltaDecoder(std::string_view data) : data_(data) {
    block_values_ = varint();
    miniblocks_ = varint();
    count_ = varint();
    value_ = zigzag();
    // The format's rules (a block a multiple of 128 values, a miniblock of 32), and a bound on a block's
    // size against a stranger's header (writers use 128 or 256).
    if (!valid_ || block_values_ == 0 || block_values_ % 128 != 0 || block_values_ > (1u << 16) || miniblocks_ == 0 ||
        block_values_ % miniblocks_ != 0 || (block_values_ / miniblocks_) % 32 != 0) {
      valid_ = false;
    }
    miniblock_values_ = valid_ ? block_values_ / miniblocks_ : 0;
  }

  bool valid() const { return valid_; }
  std::uint64_t count() const { return count_; }

  // The next value; nullopt past the count or where the data ends or does not add up.
  std::optional<std::int64_t> next() {
    if (!valid_ || produced_ >= count_) return std::nullopt;
    if (produced_ == 0) {
      ++produced_;
      return value_;
    }
    if (left_in_miniblock_ == 0) {
      if (miniblock_ == widths_.size()) {  // a new block
        min_delta_ = zigzag();
        widths_.clear();
        for (std::uint64_t i = 0; i < miniblocks_ && valid_; ++i) widths_.push_back(byte());
        miniblock_ = 0;
      } 
      if (!valid_) return std::nullopt;
      const int width = widths_[miniblock_++];
      if (width > 64) return fail();
      const std::uint64_t bytes = miniblock_values_ * static_cast<std::uint64_t>(width) / 8;
      if (bytes > data_.size() - position_) return fail();
      miniblock_begin_ = position_;
      miniblock_width_ = width;
      miniblock_index_ = 0;
      left_in_miniblock_ = miniblock_values_;
      position_ += static_cast<std::size_t>(bytes);
    }
    const std::uint64_t delta =
        unpack_bits(data_.substr(miniblock_begin_), miniblock_index_ * static_cast<std::uint64_t>(miniblock_width_),
                    miniblock_width_);
    ++miniblock_index_;
    --left_in_miniblock_;
    ++produced_;
    value_ = static_cast<std::int64_t>(static_cast<std::uint64_t>(value_) + static_cast<std::uint64_t>(min_delta_) + delta);
    return value_;
  }

  // Where the encoded integers end (the bytes after them hold what they describe): all of them are read on a
  // copy of this decoder, which keeps its place. nullopt where they do not add up.
  std::optional<std::size_t> end() const {
    DeltaDecoder rest = *this;
    while (rest.produced_ < rest.count_) {
      if (!rest.next()) return std::nullopt;
    }
    return rest.position_;
  }

 private:
  std::nullopt_t fail() {
    valid_ = false;
    return std::nullopt;
  }
  std::uint8_t byte() {
    if (position_ >= data_.size()) {
      valid_ = false;
      return 0;
    }
    return static_cast<std::uint8_t>(data_[position_++]);
  }
  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64 && valid_; shift += 7) {
      const std::uint8_t b = byte();
      value |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return value;
    }
    valid_ = false;
    return 0;
  }
  std::int64_t zigzag() {
    const std::uint64_t raw = varint();
    return static_cast<std::int64_t>(raw >> 1) ^ -static_cast<std::int64_t>(raw & 1);
  }

  std::string_view data_;
  std::size_t position_ = 0;
  bool valid_ = true;
  std::uint64_t block_values_ = 0, miniblocks_ = 0, miniblock_values_ = 0, count_ = 0, produced_ = 0;
  std::int64_t value_ = 0, min_delta_ = 0;
  std::vector<std::uint8_t> widths_;
  std::size_t miniblock_ = 0;
  std::size_t miniblock_begin_ = 0;
  int miniblock_width_ = 0;
  std::uint64_t miniblock_index_ = 0, left_in_miniblock_ = 0;
};

int bit_width_of(std::uint32_t max_value) {
  int width = 0;
  while (max_value >> width) ++width;
  return width;
}

struct SchemaElement {
  std::int64_t type = -1;
  std::int64_t repetition = 0;
  std::string name;
  std::int64_t children = 0;
};

struct ColumnChunk {
  std::uint64_t begin = 0, length = 0;  // of its pages in the file
  std::int64_t codec = 0;
  std::uint64_t values = 0;
};

struct PageHeader {
  std::int64_t type = -1;
  std::uint64_t uncompressed = 0, compressed = 0;
  std::uint64_t values = 0;
  std::int64_t encoding = -1;
  std::uint64_t definition_bytes = 0, repetition_bytes = 0;  // of a v2 page
  bool values_compressed = true;                              // of a v2 page
  std::size_t header_bytes = 0;
};

}  // namespace

struct ParquetTextReader::Impl {
  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  fs::path path;
  std::string column;
  int fd = -1;
  std::uint64_t file_size = 0;
  std::uint64_t consumed = 0;  // the footer and the pages read, for progress
  bool finished = false;
  int max_definition = 0;
  std::vector<ColumnChunk> chunks;  // the column's, one per row group

  // Where the reading is.
  std::size_t chunk = 0;
  std::uint64_t chunk_offset = 0, chunk_values = 0;
  std::string dictionary_page;                 // the chunk's dictionary page, decompressed
  std::vector<std::string_view> dictionary;   // its values
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

  DataError refuse(const std::string& what) const {
    return DataError(fmt::format("{}: {}. Write the file again with pyarrow's defaults, convert it to JSON Lines "
                                 "(`datasets`' to_json), or leave it out of --input",
                                 path.string(), what));
  }
  // A column that cannot be the corpus's text: the option names another.
  DataError wrong_column(const std::string& what) const {
    return DataError(fmt::format("{}: column '{}' {}; name the column that holds the text with --text-field",
                                 path.string(), column, what));
  }
  DataError damaged(const std::string& what) const {
    return DataError(fmt::format("{}: {}; the Parquet file is damaged or was cut short (an interrupted download?). "
                                 "Fetch it again, or leave it out of --input",
                                 path.string(), what));
  }

  std::string read_at(std::uint64_t offset, std::uint64_t size) {
    if (offset > file_size || size > file_size - offset) {
      throw damaged(fmt::format("{} bytes at offset {} lie past the file's end ({} bytes)", size, offset, file_size));
    }
    std::string bytes(static_cast<std::size_t>(size), '\0');
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t got = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw IoError(fmt::format("cannot read {}: {}.", path.string(), std::strerror(errno)));
      if (got == 0) throw damaged("the file ended while it was read");
      done += static_cast<std::size_t>(got);
    }
    return bytes;
  }

  void open() {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw IoError(fmt::format("cannot open {}: {}. Check the path and its permissions.", path.string(),
                                std::strerror(errno)));
    }
    std::error_code error;
    file_size = fs::file_size(path, error);
    if (error) throw IoError(fmt::format("cannot read the size of {}: {}.", path.string(), error.message()));
    if (file_size < 12) throw damaged(fmt::format("{} bytes are too few for a Parquet file", file_size));
    const std::string tail = read_at(file_size - 8, 8);
    if (read_at(0, 4) != "PAR1" || tail.substr(4) != "PAR1") {
      throw damaged("it does not begin and end with Parquet's mark PAR1");
    }
    std::uint64_t footer_size = 0;
    for (int i = 0; i < 4; ++i) footer_size |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(tail[i])) << (8 * i);
    if (footer_size > file_size - 12 || footer_size > kMaxFooterBytes) {
      throw damaged(fmt::format("its footer claims {} bytes", footer_size));
    }
    read_footer(read_at(file_size - 8 - footer_size, footer_size));
    consumed = 12 + footer_size;
  }

  void read_footer(const std::string& footer) {
    std::vector<SchemaElement> schema;
    std::vector<std::vector<ColumnChunk>> row_groups;
    try {
      ThriftReader reader(footer);
      reader.read_struct([&](int id, std::uint8_t type) {
        if (id == 2 && type == kThriftList) {
          reader.read_list([&](std::uint8_t) { schema.push_back(read_schema_element(reader)); });
        } else if (id == 4 && type == kThriftList) {
          reader.read_list([&](std::uint8_t) { row_groups.push_back(read_row_group(reader)); });
        } else {
          reader.skip(type);
        }
      });
    } catch (const ThriftError& e) {
      throw damaged(fmt::format("its footer cannot be read ({})", e.what()));
    }
    const std::size_t leaf = find_column(schema);
    for (auto& columns : row_groups) {
      if (leaf >= columns.size()) throw damaged("a row group has fewer columns than the schema");
      const ColumnChunk& c = columns[leaf];
      if (c.begin > file_size || c.length > file_size - c.begin) {
        throw damaged(fmt::format("column '{}' of a row group lies past the file's end", column));
      }
      chunks.push_back(c);
    }
  }

  static SchemaElement read_schema_element(ThriftReader& reader) {
    SchemaElement e;
    reader.read_struct([&](int id, std::uint8_t type) {
      if (id == 1 && type == kThriftI32) {
        e.type = reader.read_int(type);
      } else if (id == 3 && type == kThriftI32) {
        e.repetition = reader.read_int(type);
      } else if (id == 4 && type == kThriftBinary) {
        e.name = std::string(reader.read_binary());
      } else if (id == 5 && type == kThriftI32) {
        e.children = reader.read_int(type);
      } else {
        reader.skip(type);
      }
    });
    return e;
  }

  std::vector<ColumnChunk> read_row_group(ThriftReader& reader) {
    std::vector<ColumnChunk> columns;
    reader.read_struct([&](int id, std::uint8_t type) {
      if (id != 1 || type != kThriftList) return reader.skip(type);
      reader.read_list([&](std::uint8_t) {
        ColumnChunk c;
        bool elsewhere = false;
        std::int64_t data_offset = -1, dictionary_offset = -1, length = -1, values = -1;
        reader.read_struct([&](int chunk_id, std::uint8_t chunk_type) {
          if (chunk_id == 1 && chunk_type == kThriftBinary) {
            elsewhere = !reader.read_binary().empty();
          } else if (chunk_id == 3 && chunk_type == kThriftStruct) {
            reader.read_struct([&](int meta_id, std::uint8_t meta_type) {
              if (meta_type == kThriftI32 || meta_type == kThriftI64) {
                const std::int64_t v = reader.read_int(meta_type);
                if (meta_id == 4) c.codec = v;
                if (meta_id == 5) values = v;
                if (meta_id == 7) length = v;
                if (meta_id == 9) data_offset = v;
                if (meta_id == 11) dictionary_offset = v;
              } else {
                reader.skip(meta_type);
              }
            });
          } else {
            reader.skip(chunk_type);
          }
        });
        if (elsewhere) throw refuse("its columns lie in other files (ColumnChunk.file_path), which loco does not follow");
        if (data_offset < 0 || length < 0 || values < 0) throw damaged("a column chunk has no offset, size or count");
        // The dictionary page, where there is one, comes first (some writers give it as 0 when there is none).
        c.begin = static_cast<std::uint64_t>(
            dictionary_offset > 0 && dictionary_offset < data_offset ? dictionary_offset : data_offset);
        c.length = static_cast<std::uint64_t>(length);
        c.values = static_cast<std::uint64_t>(values);
        columns.push_back(c);
      });
    });
    return columns;
  }

  // The index of `column` among the schema's leaves, which is its index among a row group's column chunks.
  std::size_t find_column(const std::vector<SchemaElement>& schema) {
    if (schema.empty()) throw damaged("its schema is empty");
    struct Group {
      std::int64_t children_left;
      std::string path;
      int definition;
      bool repeated;
    };
    std::vector<Group> groups{{schema[0].children, "", 0, false}};
    std::vector<std::string> top_level;
    std::optional<std::size_t> found;
    std::size_t leaves = 0;
    for (std::size_t i = 1; i < schema.size();) {
      if (groups.empty()) throw damaged("its schema holds more fields than its groups name");
      Group& parent = groups.back();
      if (parent.children_left <= 0) {
        groups.pop_back();
        continue;
      }
      --parent.children_left;
      const SchemaElement& e = schema[i++];
      const std::string path = parent.path.empty() ? e.name : parent.path + "." + e.name;
      const int definition = parent.definition + (e.repetition == kOptional || e.repetition == kRepeated ? 1 : 0);
      const bool repeated = parent.repeated || e.repetition == kRepeated;
      const bool at_top = groups.size() == 1;
      if (at_top && top_level.size() < 20) top_level.push_back(e.name);
      if (e.children > 0) {
        if (at_top && e.name == column) {
          throw wrong_column("is a group of other columns, not a string column");
        }
        if (groups.size() >= kMaxThriftDepth) throw damaged("its schema nests too deep");
        groups.push_back({e.children, path, definition, repeated});
        continue;
      }
      if (at_top && e.name == column) {
        if (e.type != kByteArray) {
          throw wrong_column(fmt::format("holds numbers or other values (Parquet type {}), not text", e.type));
        }
        if (repeated) throw wrong_column("is a list of values, not one text per row");
        found = leaves;
        max_definition = definition;
      }
      ++leaves;
    }
    if (!found) {
      throw DataError(fmt::format("{} has no column '{}'; its columns are {}. Name the one that holds the text with "
                                  "--text-field",
                                  path.string(), column, fmt::join(top_level, ", ")));
    }
    return *found;
  }

  PageHeader read_page_header(std::uint64_t offset, std::uint64_t limit) {
    for (std::size_t window = kFirstHeaderWindow;; window *= 8) {
      const std::uint64_t size = std::min<std::uint64_t>(window, limit);
      const std::string bytes = read_at(offset, size);
      try {
        PageHeader h;
        ThriftReader reader(bytes);
        reader.read_struct([&](int id, std::uint8_t type) {
          if (id == 1 && type == kThriftI32) {
            h.type = reader.read_int(type);
          } else if ((id == 2 || id == 3) && type == kThriftI32) {
            const std::int64_t v = reader.read_int(type);
            if (v < 0) throw ThriftError("a negative page size", false);
            (id == 2 ? h.uncompressed : h.compressed) = static_cast<std::uint64_t>(v);
          } else if ((id == 5 || id == 7 || id == 8) && type == kThriftStruct) {
            reader.read_struct([&](int field, std::uint8_t field_type) {
              if (field_type == kThriftTrue || field_type == kThriftFalse) {
                if (id == 8 && field == 7) h.values_compressed = reader.read_int(field_type) != 0;
                return;
              }
              if (field_type != kThriftI32) return reader.skip(field_type);
              const std::int64_t v = reader.read_int(field_type);
              if (v < 0) throw ThriftError("a negative count", false);
              const auto u = static_cast<std::uint64_t>(v);
              if (field == 1) h.values = u;
              if ((id != 8 && field == 2) || (id == 8 && field == 4)) h.encoding = v;
              if (id == 8 && field == 5) h.definition_bytes = u;
              if (id == 8 && field == 6) h.repetition_bytes = u;
            });
          } else {
            reader.skip(type);
          }
        });
        h.header_bytes = reader.position();
        if (h.type < kDataPage || h.type > kDataPageV2) throw ThriftError(fmt::format("page type {}", h.type), false);
        return h;
      } catch (const ThriftError& e) {
        if (!e.ended_early() || size == limit || window >= kMaxHeaderBytes) {
          throw damaged(fmt::format("a page header at offset {} cannot be read ({})", offset, e.what()));
        }
      }
    }
  }

  std::string decompress(std::string compressed, std::int64_t codec, std::uint64_t size) const {
    if (size > kMaxParquetPageBytes) {
      throw damaged(fmt::format("a page claims {} bytes, more than the {} MiB loco reads", size,
                                kMaxParquetPageBytes >> 20));
    }
    if (codec == kUncompressed) {
      if (compressed.size() != size) throw damaged("an uncompressed page's two sizes differ");
      return compressed;
    }
    std::string out(static_cast<std::size_t>(size), '\0');
    if (codec == kZstd) {
      const std::size_t got = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
      if (ZSTD_isError(got) || got != out.size()) throw damaged("a zstd page does not decompress to its size");
      return out;
    }
    if (codec == kGzip) {
      z_stream stream{};
      if (inflateInit2(&stream, 15 + 32) != Z_OK) throw IoError("zlib could not start a decoder (out of memory?).");
      stream.next_in = reinterpret_cast<Bytef*>(compressed.data());
      stream.avail_in = static_cast<uInt>(compressed.size());
      stream.next_out = reinterpret_cast<Bytef*>(out.data());
      stream.avail_out = static_cast<uInt>(out.size());
      const int result = inflate(&stream, Z_FINISH);
      const bool whole = result == Z_STREAM_END && stream.total_out == out.size();
      inflateEnd(&stream);
      if (!whole) throw damaged("a gzip page does not decompress to its size");
      return out;
    }
    if (codec == kSnappy) {
#if LOCO_HAVE_SNAPPY
      std::size_t length = 0;
      if (snappy_uncompressed_length(compressed.data(), compressed.size(), &length) != SNAPPY_OK ||
          length != out.size() || snappy_uncompress(compressed.data(), compressed.size(), out.data(), &length) != SNAPPY_OK) {
        throw damaged("a snappy page does not decompress to its size");
      }
      return out;
#else
      throw refuse("its pages are compressed with snappy, and this build of loco has no libsnappy");
#endif
    }
    throw refuse(fmt::format("its pages are compressed with {}, which loco does not read (it reads snappy, gzip, "
                             "zstd and uncompressed pages)",
                             codec_name(codec)));
  }

  // The bytes of a page's body, as decompressed: all of it, or for a v2 page its levels (never compressed)
  // followed by its values.
  std::string page_body(const PageHeader& h, std::uint64_t offset, std::int64_t codec) {
    if (h.compressed > kMaxParquetPageBytes) {
      throw damaged(fmt::format("a page claims {} bytes, more than the {} MiB loco reads", h.compressed,
                                kMaxParquetPageBytes >> 20));
    }
    std::string raw = read_at(offset, h.compressed);
    if (h.type != kDataPageV2) return decompress(std::move(raw), codec, h.uncompressed);
    const std::uint64_t levels = h.definition_bytes + h.repetition_bytes;
    if (levels > raw.size() || levels > h.uncompressed) throw damaged("a page's levels are larger than the page");
    std::string body = raw.substr(0, static_cast<std::size_t>(levels));
    body += decompress(raw.substr(static_cast<std::size_t>(levels)), h.values_compressed ? codec : kUncompressed,
                       h.uncompressed - levels);
    return body;
  }

  static std::optional<std::string_view> next_plain(std::string_view& values) {
    if (values.size() < 4) return std::nullopt;
    std::uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(values[i])) << (8 * i);
    if (length > values.size() - 4) return std::nullopt;
    const std::string_view value = values.substr(4, length);
    values.remove_prefix(4 + length);
    return value;
  }

  // Reads pages of the chunk at hand until a data page with values; false after the last chunk.
  bool next_data_page() {
    for (;;) {
      if (chunk >= chunks.size()) return false;
      const ColumnChunk& c = chunks[chunk];
      if (chunk_values >= c.values || chunk_offset >= c.length) {
        if (chunk_values < c.values) throw damaged(fmt::format("a row group holds fewer values of '{}' than it says", column));
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
        if (h.encoding != kPlain && h.encoding != kPlainDictionary) {
          throw refuse(fmt::format("a dictionary page has the encoding {}", h.encoding));
        }
        if (h.values > kMaxDictionaryValues) {
          throw damaged(fmt::format("a dictionary claims {} values, more than any writer makes", h.values));
        }
        dictionary.clear();
        dictionary_page = page_body(h, at + h.header_bytes, c.codec);
        std::string_view values = dictionary_page;
        for (std::uint64_t i = 0; i < h.values; ++i) {
          const auto value = next_plain(values);
          if (!value) throw damaged("a dictionary page holds fewer values than it says");
          dictionary.push_back(*value);
        }
        has_dictionary = true;
        continue;
      }
      if (h.type != kDataPage && h.type != kDataPageV2) continue;  // an index page (type 1)
      if (h.values > c.values - chunk_values) throw damaged("a page holds more values than its row group");
      if (h.values > kMaxPageValues) {
        throw damaged(fmt::format("a page claims {} rows, more than the {} any writer puts in one", h.values,
                                  kMaxPageValues));
      }
      chunk_values += h.values;
      page = page_body(h, at + h.header_bytes, c.codec);
      std::string_view rest = page;
      definitions.reset();
      if (max_definition > 0) {
        std::string_view levels;
        if (h.type == kDataPageV2) {
          levels = rest.substr(static_cast<std::size_t>(h.repetition_bytes), static_cast<std::size_t>(h.definition_bytes));
          rest.remove_prefix(static_cast<std::size_t>(h.repetition_bytes + h.definition_bytes));
        } else {
          std::uint32_t length = 0;
          if (rest.size() < 4) throw damaged("a page ends before its definition levels");
          for (int i = 0; i < 4; ++i) length |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(rest[i])) << (8 * i);
          if (length > rest.size() - 4) throw damaged("a page's definition levels run past the page");
          levels = rest.substr(4, length);
          rest.remove_prefix(4 + length);
        }
        definitions.emplace(levels, bit_width_of(static_cast<std::uint32_t>(max_definition)));
      } else if (h.type == kDataPageV2) {
        rest.remove_prefix(static_cast<std::size_t>(h.repetition_bytes + h.definition_bytes));
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
        throw refuse(fmt::format("column '{}' is written with encoding {}, which strings do not have", column,
                                 h.encoding));
      }
      page_values_left = h.values;
      if (page_values_left > 0) return true;
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

  bool next(std::string& text, std::uint64_t& row_number) {
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
        if (level != static_cast<std::uint32_t>(max_definition)) {  // a null row, maybe the first of a run
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
};

ParquetTextReader::ParquetTextReader(const fs::path& path, const std::string& column) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->column = column;
  impl_->open();
}

ParquetTextReader::~ParquetTextReader() = default;

bool ParquetTextReader::next(std::string& text, std::uint64_t& row) { return impl_->next(text, row); }

std::uint64_t ParquetTextReader::file_bytes_read() const {
  return impl_->finished ? impl_->file_size : std::min(impl_->consumed, impl_->file_size);
}

}  // namespace loco::data
