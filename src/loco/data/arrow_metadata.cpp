#include "loco/data/arrow_metadata.h"

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>

#include <optional>
#include <string>

namespace loco::data {

namespace {

// Numbers of Arrow's Message.fbs and Schema.fbs that loco's reader meets.
namespace arrow {
// Message.header (a union): its member's kind.
inline constexpr std::uint8_t kSchema = 1, kDictionaryBatch = 2, kRecordBatch = 3;
// Field.type (a union): its member's kind.
enum Type : std::uint8_t {
  kNull = 1,
  kInt,
  kFloatingPoint,
  kBinary,
  kUtf8,
  kBool,
  kDecimal,
  kDate,
  kTime,
  kTimestamp,
  kInterval,
  kList,
  kStruct,
  kUnion,
  kFixedSizeBinary,
  kFixedSizeList,
  kMap,
  kDuration,
  kLargeBinary,
  kLargeUtf8,
  kLargeList,
  kRunEndEncoded,
  kBinaryView,
  kUtf8View,
  kListView,
  kLargeListView
};
inline constexpr std::int16_t kVersion4 = 3, kVersion5 = 4;  // MetadataVersion: Arrow 0.15 and later; 1.0 and later
inline constexpr std::int16_t kBigEndian = 1;
inline constexpr std::int16_t kDenseUnion = 1;
inline constexpr std::int8_t kLz4Frame = 0, kZstd = 1;  // CompressionType
}  // namespace arrow

// A table of the metadata, verified as it is read: each accessor checks the field before returning it, and
// the table's own start is checked on construction (ended on destruction, so that nesting is counted right).
class VerifiedTable {
 public:
  VerifiedTable(const flatbuffers::Table* table, flatbuffers::Verifier& verifier, const TableFileProblems& problems)
      : table_(table), verifier_(verifier), problems_(problems) {
    if (table_ == nullptr || !table_->VerifyTableStart(verifier_)) throw bad();
  }
  ~VerifiedTable() { verifier_.EndTable(); }
  VerifiedTable(const VerifiedTable&) = delete;
  VerifiedTable& operator=(const VerifiedTable&) = delete;

  template <typename T>
  T scalar(int slot, T otherwise) const {
    if (!table_->VerifyField<T>(verifier_, voffset(slot), sizeof(T))) throw bad();
    return table_->GetField<T>(voffset(slot), otherwise);
  }
  // The table in field `slot`; nullptr when the field is absent.
  const flatbuffers::Table* table(int slot) const { return pointer<flatbuffers::Table>(slot); }
  std::string_view string(int slot) const {
    const auto* s = pointer<flatbuffers::String>(slot);
    if (s == nullptr) return {};
    if (!verifier_.VerifyString(s)) throw bad();
    return {s->c_str(), s->size()};
  }
  template <typename T>
  const flatbuffers::Vector<T>* vector(int slot) const {
    const auto* v = pointer<flatbuffers::Vector<T>>(slot);
    if (v != nullptr && !verifier_.VerifyVector(v)) throw bad();
    return v;
  }
  DataError bad() const { return problems_.damaged("a message's metadata is not a valid FlatBuffers table"); }

 private:
  static flatbuffers::voffset_t voffset(int slot) { return static_cast<flatbuffers::voffset_t>(4 + 2 * slot); }
  template <typename T>
  const T* pointer(int slot) const {
    if (!table_->VerifyOffset(verifier_, voffset(slot))) throw bad();
    return table_->GetPointer<const T*>(voffset(slot));
  }

  const flatbuffers::Table* table_;
  flatbuffers::Verifier& verifier_;
  const TableFileProblems& problems_;
};

// Field table slots: name, nullable, type_type, type, dictionary, children.
enum FieldSlot { kName = 0, kTypeType = 2, kType = 3, kDictionary = 4, kChildren = 5 };

const char* type_name(std::uint8_t type) {
  static constexpr const char* kNames[] = {"none",
                                           "null",
                                           "integers",
                                           "floating-point numbers",
                                           "binary",
                                           "text (Utf8)",
                                           "booleans",
                                           "decimals",
                                           "dates",
                                           "times",
                                           "timestamps",
                                           "intervals",
                                           "lists",
                                           "a struct",
                                           "a union",
                                           "fixed-size binary",
                                           "fixed-size lists",
                                           "a map",
                                           "durations",
                                           "large binary",
                                           "text (LargeUtf8)",
                                           "large lists",
                                           "run-end encoded values",
                                           "binary views",
                                           "text views (Utf8View)",
                                           "list views",
                                           "large list views"};
  return type < std::size(kNames) ? kNames[type] : "a type newer than this reader";
}

// Counts the field nodes and buffers that `field` (and its children) has in a record batch.
struct LayoutCounter {
  flatbuffers::Verifier& verifier;
  const TableFileProblems& problems;
  bool union_validity;  // V4 metadata: a union has a validity buffer as well (none since V5)
  std::size_t nodes = 0, buffers = 0, view_fields = 0;

  void count(const flatbuffers::Table* field_table) { count(VerifiedTable(field_table, verifier, problems)); }

  void count(const VerifiedTable& field) {
    ++nodes;
    const auto type = field.scalar<std::uint8_t>(kTypeType, 0);
    if (field.table(kDictionary) != nullptr) {  // the indices stand for the field: validity and integers
      buffers += 2;
      return;
    }
    switch (type) {
      case arrow::kNull:
      case arrow::kRunEndEncoded:
        break;
      case arrow::kStruct:
      case arrow::kFixedSizeList:
        buffers += 1;
        break;
      case arrow::kUnion: {  // type ids, and for a dense union offsets
        const VerifiedTable union_type(field.table(kType), verifier, problems);
        buffers += (union_type.scalar<std::int16_t>(0, 0) == arrow::kDenseUnion ? 2 : 1) + (union_validity ? 1 : 0);
        break;
      }
      case arrow::kBinary:
      case arrow::kUtf8:
      case arrow::kLargeBinary:
      case arrow::kLargeUtf8:
      case arrow::kListView:
      case arrow::kLargeListView:
        buffers += 3;
        break;
      case arrow::kBinaryView:
      case arrow::kUtf8View:
        ++view_fields;
        buffers += 2;
        break;
      default:
        if (type == 0 || type > arrow::kLargeListView) {
          throw problems.unsupported(
              fmt::format("its schema holds a field of type {}, which this reader does not know", type));
        }
        buffers += 2;  // validity, then values or offsets
    }
    if (const auto* children = field.vector<flatbuffers::Offset<flatbuffers::Table>>(kChildren)) {
      for (flatbuffers::uoffset_t i = 0; i < children->size(); ++i) count(children->Get(i));
    }
  }
};

ArrowColumn read_schema(const VerifiedTable& schema, std::int16_t version, flatbuffers::Verifier& verifier,
                        const TableFileProblems& problems) {
  if (schema.scalar<std::int16_t>(0, 0) == arrow::kBigEndian) {
    throw problems.unsupported("its values are big-endian");
  }
  ArrowColumn column;
  std::optional<std::size_t> found;
  std::vector<std::string> names;
  LayoutCounter counter{verifier, problems, version < arrow::kVersion5};
  if (const auto* fields = schema.vector<flatbuffers::Offset<flatbuffers::Table>>(1)) {
    for (flatbuffers::uoffset_t i = 0; i < fields->size(); ++i) {
      const VerifiedTable field(fields->Get(i), verifier, problems);
      const std::string_view name = field.string(kName);
      if (names.size() < 20) names.emplace_back(name);
      if (name == problems.column && !found) {
        found = i;
        const auto type = field.scalar<std::uint8_t>(kTypeType, 0);
        if (field.table(kDictionary) != nullptr) {
          throw problems.unsupported(fmt::format(
              "column '{}' is dictionary-encoded, which loco does not read (cast it to a plain string column)", name));
        }
        if (type != arrow::kUtf8 && type != arrow::kLargeUtf8 && type != arrow::kUtf8View) {
          throw problems.wrong_column(fmt::format("holds {}, not text (Utf8)", type_name(type)));
        }
        column.node = counter.nodes;
        column.first_buffer = counter.buffers;
        column.view_fields_before = counter.view_fields;
        column.layout = type == arrow::kUtf8        ? ArrowColumn::Layout::utf8
                        : type == arrow::kLargeUtf8 ? ArrowColumn::Layout::large_utf8
                                                    : ArrowColumn::Layout::utf8_view;
      }
      counter.count(field);
    }
  }
  if (!found) throw problems.missing_column(names);
  column.nodes = counter.nodes;
  column.fixed_buffers = counter.buffers;
  column.view_fields = counter.view_fields;
  return column;
}

// FieldNode and Buffer of Message.fbs: structs of two little-endian 64-bit integers each.
struct TwoLongs {
  std::int64_t first, second;
};
static_assert(sizeof(TwoLongs) == 16);

ArrowRecordBatch read_record_batch(const VerifiedTable& batch, const ArrowColumn& column,
                                   flatbuffers::Verifier& verifier, const TableFileProblems& problems) {
  ArrowRecordBatch out;
  out.rows = batch.scalar<std::int64_t>(0, 0);
  if (const flatbuffers::Table* compression = batch.table(3)) {  // BodyCompression: codec, method
    const VerifiedTable body(compression, verifier, problems);
    const auto codec = body.scalar<std::int8_t>(0, 0);
    if (body.scalar<std::int8_t>(1, 0) != 0 || (codec != arrow::kLz4Frame && codec != arrow::kZstd)) {
      throw problems.unsupported(
          fmt::format("its record batches are compressed in a way this reader does not know "
                      "(codec {}, method {})",
                      codec, body.scalar<std::int8_t>(1, 0)));
    }
    out.codec = codec == arrow::kLz4Frame ? BlockCodec::lz4_frame : BlockCodec::zstd;
  }
  const auto* nodes = batch.vector<const TwoLongs*>(1);
  const auto* buffers = batch.vector<const TwoLongs*>(2);
  const auto* variadic = batch.vector<std::int64_t>(4);
  const std::size_t node_count = nodes != nullptr ? nodes->size() : 0;
  const std::size_t variadic_count = variadic != nullptr ? variadic->size() : 0;
  if (node_count != column.nodes) {
    throw problems.damaged(
        fmt::format("a record batch has {} fields where its schema has {}", node_count, column.nodes));
  }
  if (variadic_count != column.view_fields) {
    throw problems.damaged(fmt::format("a record batch counts the buffers of {} view fields where its schema has {}",
                                       variadic_count, column.view_fields));
  }
  std::uint64_t buffer_count = column.fixed_buffers;
  std::uint64_t first_buffer = column.first_buffer;
  for (std::size_t i = 0; i < variadic_count; ++i) {
    const std::int64_t more = variadic->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (more < 0 || static_cast<std::uint64_t>(more) > (std::uint64_t{1} << 32)) {
      throw problems.damaged("a record batch claims a negative or impossible number of buffers");
    }
    buffer_count += static_cast<std::uint64_t>(more);
    if (i < column.view_fields_before) first_buffer += static_cast<std::uint64_t>(more);
  }
  if ((buffers != nullptr ? buffers->size() : 0) != buffer_count) {
    throw problems.damaged(fmt::format("a record batch has {} buffers where its schema needs {}",
                                       buffers != nullptr ? buffers->size() : 0, buffer_count));
  }
  const TwoLongs* node = nodes->Get(static_cast<flatbuffers::uoffset_t>(column.node));
  out.column_rows = node->first;
  out.column_nulls = node->second;
  // Validity and offsets, then one buffer of bytes; or validity and views, then the view column's own count of
  // data buffers (it is the next view field).
  const std::uint64_t column_buffers = column.layout == ArrowColumn::Layout::utf8_view
                                           ? 2 + static_cast<std::uint64_t>(variadic->Get(
                                                     static_cast<flatbuffers::uoffset_t>(column.view_fields_before)))
                                           : 3;
  for (std::uint64_t i = first_buffer; i < first_buffer + column_buffers; ++i) {
    const TwoLongs* b = buffers->Get(static_cast<flatbuffers::uoffset_t>(i));
    out.buffers.push_back({b->first, b->second});
  }
  return out;
}

// The root table of FlatBuffers bytes, after checking that its offset lies inside them.
const flatbuffers::Table* root_of(std::string_view bytes, flatbuffers::Verifier& verifier,
                                  const TableFileProblems& problems) {
  if (bytes.size() < sizeof(flatbuffers::uoffset_t) || verifier.VerifyOffset(0) == 0) {
    throw problems.damaged("a message's metadata is not a valid FlatBuffers table");
  }
  return flatbuffers::GetRoot<flatbuffers::Table>(bytes.data());
}

// The metadata version of a message or footer (slot 0 of both): V4 or later.
std::int16_t version_of(const VerifiedTable& table, const TableFileProblems& problems) {
  const auto version = table.scalar<std::int16_t>(0, 0);
  if (version < arrow::kVersion4) {
    throw problems.unsupported("it was written by an Arrow older than 0.15 (metadata version before V4)");
  }
  return version;
}

// Block of File.fbs: a message's offset in the file, its metadata's length (padded to 8 bytes), its body's.
struct Block {
  std::int64_t offset;
  std::int32_t metadata_length;
  std::int32_t padding;
  std::int64_t body_length;
};
static_assert(sizeof(Block) == 24);

}  // namespace

ArrowFooter parse_arrow_footer(std::string_view footer, std::uint64_t messages_end, const TableFileProblems& problems) {
  flatbuffers::Verifier verifier(reinterpret_cast<const std::uint8_t*>(footer.data()), footer.size());
  const VerifiedTable table(root_of(footer, verifier, problems), verifier, problems);
  const std::int16_t version = version_of(table, problems);
  ArrowFooter out;
  {
    const VerifiedTable schema(table.table(1), verifier, problems);
    out.column = read_schema(schema, version, verifier, problems);
  }
  if (const auto* blocks = table.vector<const Block*>(3)) {
    for (flatbuffers::uoffset_t i = 0; i < blocks->size(); ++i) {
      const std::int64_t offset = blocks->Get(i)->offset;
      if (offset < 0 || static_cast<std::uint64_t>(offset) >= messages_end) {
        throw problems.damaged(
            fmt::format("its footer places a record batch at offset {}, outside the file's "
                        "messages",
                        offset));
      }
      out.record_batches.push_back(static_cast<std::uint64_t>(offset));
    }
  }
  return out;
}

ArrowMessage parse_arrow_message(std::string_view metadata, const ArrowColumn* schema,
                                 const TableFileProblems& problems) {
  flatbuffers::Verifier verifier(reinterpret_cast<const std::uint8_t*>(metadata.data()), metadata.size());
  const VerifiedTable message(root_of(metadata, verifier, problems), verifier, problems);
  const auto version = version_of(message, problems);
  ArrowMessage out;
  out.body_length = message.scalar<std::int64_t>(3, 0);
  if (out.body_length < 0) throw problems.damaged("a message claims a negative body length");
  const auto kind = message.scalar<std::uint8_t>(1, 0);
  const VerifiedTable header(message.table(2), verifier, problems);
  if (kind == arrow::kSchema) {
    if (schema != nullptr) throw problems.damaged("it holds a second schema");
    out.kind = ArrowMessage::Kind::schema;
    out.column = read_schema(header, version, verifier, problems);
  } else if (schema == nullptr) {
    throw problems.damaged("its first message is not its schema");
  } else if (kind == arrow::kDictionaryBatch) {
    out.kind = ArrowMessage::Kind::dictionary_batch;  // another column's dictionary: not read
  } else if (kind == arrow::kRecordBatch) {
    out.kind = ArrowMessage::Kind::record_batch;
    out.batch = read_record_batch(header, *schema, verifier, problems);
  } else {
    throw problems.unsupported("it holds tensors, not a table");
  }
  return out;
}

}  // namespace loco::data
