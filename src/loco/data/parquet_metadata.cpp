#include "loco/data/parquet_metadata.h"

#include <fmt/format.h>

#include <optional>

#include "loco/data/block_decompress.h"
#include "loco/data/thrift_compact.h"

namespace loco::data {

using namespace parquet;

namespace {

struct SchemaElement {
  std::int64_t type = -1;
  std::int64_t repetition = 0;
  std::string name;
  std::int64_t children = 0;
};

SchemaElement read_schema_element(ThriftReader& reader) {
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

// A ColumnChunk: its file_path (field 1: set where it lies in another file) and, of its ColumnMetaData
// (field 3), the codec (4), the number of values (5), the compressed size (7) and the offsets of its data
// and dictionary pages (9, 11).
ColumnChunk read_column_chunk(ThriftReader& reader, const TableFileProblems& problems) {
  ColumnChunk c;
  bool elsewhere = false;
  std::int64_t data_offset = -1, dictionary_offset = -1, length = -1, values = -1;
  const auto read_metadata = [&] {
    reader.read_struct([&](int id, std::uint8_t type) {
      if (type != kThriftI32 && type != kThriftI64) return reader.skip(type);
      const std::int64_t v = reader.read_int(type);
      if (id == 4) c.codec = v;
      if (id == 5) values = v;
      if (id == 7) length = v;
      if (id == 9) data_offset = v;
      if (id == 11) dictionary_offset = v;
    });
  };
  reader.read_struct([&](int id, std::uint8_t type) {
    if (id == 1 && type == kThriftBinary) {
      elsewhere = !reader.read_binary().empty();
    } else if (id == 3 && type == kThriftStruct) {
      read_metadata();
    } else {
      reader.skip(type);
    }
  });
  if (elsewhere) {
    throw problems.unsupported("its columns lie in other files (ColumnChunk.file_path), which loco does not follow");
  }
  if (data_offset < 0 || length < 0 || values < 0)
    throw problems.damaged("a column chunk has no offset, size or count");
  // The dictionary page, where there is one, comes first (some writers give it as 0 when there is none).
  c.begin = static_cast<std::uint64_t>(dictionary_offset > 0 && dictionary_offset < data_offset ? dictionary_offset
                                                                                                : data_offset);
  c.length = static_cast<std::uint64_t>(length);
  c.values = static_cast<std::uint64_t>(values);
  return c;
}

// A RowGroup's column chunks (field 1), in the schema's leaf order.
std::vector<ColumnChunk> read_row_group(ThriftReader& reader, const TableFileProblems& problems) {
  std::vector<ColumnChunk> columns;
  reader.read_struct([&](int id, std::uint8_t type) {
    if (id != 1 || type != kThriftList) return reader.skip(type);
    reader.read_list([&](std::uint8_t) { columns.push_back(read_column_chunk(reader, problems)); });
  });
  return columns;
}

// The index of the column among the schema's leaves (its index among a row group's chunks), and its maximum
// definition level. The schema is a tree written depth first: a group gives its number of children.
std::pair<std::size_t, int> find_column(const std::vector<SchemaElement>& schema, const TableFileProblems& problems) {
  if (schema.empty()) throw problems.damaged("its schema is empty");
  struct Group {
    std::int64_t children_left;
    int definition;
    bool repeated;
  };
  std::vector<Group> groups{{schema[0].children, 0, false}};
  std::vector<std::string> top_level;
  std::optional<std::pair<std::size_t, int>> found;
  std::size_t leaves = 0;
  for (std::size_t i = 1; i < schema.size();) {
    if (groups.empty()) throw problems.damaged("its schema holds more fields than its groups name");
    Group& parent = groups.back();
    if (parent.children_left <= 0) {
      groups.pop_back();
      continue;
    }
    --parent.children_left;
    const SchemaElement& e = schema[i++];
    const int definition = parent.definition + (e.repetition == kOptional || e.repetition == kRepeated ? 1 : 0);
    const bool repeated = parent.repeated || e.repetition == kRepeated;
    const bool the_column = groups.size() == 1 && e.name == problems.column;
    if (groups.size() == 1 && top_level.size() < 20) top_level.push_back(e.name);
    if (e.children > 0) {
      if (the_column) throw problems.wrong_column("is a group of other columns, not a string column");
      if (groups.size() >= kMaxThriftDepth) throw problems.damaged("its schema nests too deep");
      groups.push_back({e.children, definition, repeated});
      continue;
    }
    if (the_column) {
      if (e.type != kByteArray) {
        throw problems.wrong_column(fmt::format("holds numbers or other values (Parquet type {}), not text", e.type));
      }
      if (repeated) throw problems.wrong_column("is a list of values, not one text per row");
      found = {leaves, definition};
    }
    ++leaves;
  }
  if (!found) {
    throw problems.missing_column(top_level);
  }
  return *found;
}

const char* codec_name(std::int64_t codec) {
  switch (codec) {
    case 3:
      return "LZO";
    case 4:
      return "BROTLI";
    case 5:
      return "LZ4 (Hadoop framing)";
    default:
      return "an unknown codec";
  }
}

}  // namespace

ParquetColumn read_parquet_footer(std::string_view footer, std::uint64_t file_size, const TableFileProblems& problems) {
  std::vector<SchemaElement> schema;
  std::vector<std::vector<ColumnChunk>> row_groups;
  try {
    ThriftReader reader(footer);
    reader.read_struct([&](int id, std::uint8_t type) {
      if (id == 2 && type == kThriftList) {
        reader.read_list([&](std::uint8_t) { schema.push_back(read_schema_element(reader)); });
      } else if (id == 4 && type == kThriftList) {
        reader.read_list([&](std::uint8_t) { row_groups.push_back(read_row_group(reader, problems)); });
      } else {
        reader.skip(type);
      }
    });
  } catch (const ThriftError& e) {
    throw problems.damaged(fmt::format("its footer cannot be read ({})", e.what()));
  }
  const auto [leaf, max_definition] = find_column(schema, problems);
  ParquetColumn column;
  column.max_definition = max_definition;
  for (const auto& chunks : row_groups) {
    if (leaf >= chunks.size()) throw problems.damaged("a row group has fewer columns than the schema");
    const ColumnChunk& c = chunks[leaf];
    if (c.begin > file_size || c.length > file_size - c.begin) {
      throw problems.damaged(fmt::format("column '{}' of a row group lies past the file's end", problems.column));
    }
    column.chunks.push_back(c);
  }
  return column;
}

PageHeader parse_page_header(std::string_view bytes) {
  PageHeader h;
  ThriftReader reader(bytes);
  // DataPageHeader (field 5) and DictionaryPageHeader (7): the number of values (1) and the encoding (2);
  // DataPageHeaderV2 (8): the number of values (1), the encoding (4), the sizes of the definition and
  // repetition levels (5, 6) and whether the values are compressed (7).
  const auto read_type_header = [&](int header) {
    reader.read_struct([&](int field, std::uint8_t type) {
      if (type == kThriftTrue || type == kThriftFalse) {
        if (header == 8 && field == 7) h.values_compressed = reader.read_int(type) != 0;
        return;
      }
      if (type != kThriftI32) return reader.skip(type);
      const std::int64_t v = reader.read_int(type);
      if (v < 0) throw ThriftError("a negative count", false);
      const auto u = static_cast<std::uint64_t>(v);
      if (field == 1) h.values = u;
      if ((header != 8 && field == 2) || (header == 8 && field == 4)) h.encoding = v;
      if (header == 8 && field == 5) h.definition_bytes = u;
      if (header == 8 && field == 6) h.repetition_bytes = u;
    });
  };
  reader.read_struct([&](int id, std::uint8_t type) {
    if (id == 1 && type == kThriftI32) {
      h.type = reader.read_int(type);
    } else if ((id == 2 || id == 3) && type == kThriftI32) {
      const std::int64_t v = reader.read_int(type);
      if (v < 0) throw ThriftError("a negative page size", false);
      (id == 2 ? h.uncompressed : h.compressed) = static_cast<std::uint64_t>(v);
    } else if ((id == 5 || id == 7 || id == 8) && type == kThriftStruct) {
      read_type_header(id);
    } else {
      reader.skip(type);
    }
  });
  h.header_bytes = reader.position();
  if (h.type < kDataPage || h.type > kDataPageV2) throw ThriftError(fmt::format("page type {}", h.type), false);
  return h;
}

std::string decompress_page(std::string compressed, std::int64_t codec, std::uint64_t size,
                            const TableFileProblems& problems) {
  if (size > kMaxParquetPageBytes) {
    throw problems.damaged(
        fmt::format("a page claims {} bytes, more than the {} MiB loco reads", size, kMaxParquetPageBytes >> 20));
  }
  if (codec == kUncompressed) {
    if (compressed.size() != size) throw problems.damaged("an uncompressed page's two sizes differ");
    return compressed;
  }
  const std::optional<BlockCodec> block_codec = codec == kSnappy   ? std::optional(BlockCodec::snappy)
                                                : codec == kGzip   ? std::optional(BlockCodec::gzip)
                                                : codec == kZstd   ? std::optional(BlockCodec::zstd)
                                                : codec == kLz4Raw ? std::optional(BlockCodec::lz4_block)
                                                                   : std::nullopt;
  if (!block_codec) {
    throw problems.unsupported(
        fmt::format("its pages are compressed with {}, which loco does not read (it reads "
                    "snappy, gzip, zstd, LZ4_RAW and uncompressed pages)",
                    codec_name(codec)));
  }
  return decompress_block(*block_codec, compressed, size, "a page", problems);
}

}  // namespace loco::data
