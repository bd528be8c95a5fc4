#include "loco/data/thrift_compact.h"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "loco/data/packed_integers.h"

namespace loco::data {

class ThriftReader::Level {
 public:
  explicit Level(ThriftReader& reader) : reader_(reader) {
    if (++reader_.depth_ > kMaxThriftDepth) {
      throw ThriftError(fmt::format("values nest more than {} deep", kMaxThriftDepth), false);
    }
  }
  ~Level() { --reader_.depth_; }
  Level(const Level&) = delete;
  Level& operator=(const Level&) = delete;

 private:
  ThriftReader& reader_;
};

std::uint8_t ThriftReader::read_byte() {
  if (position_ >= bytes_.size()) throw ThriftError("the bytes end in the middle of a value", true);
  return static_cast<std::uint8_t>(bytes_[position_++]);
}

std::uint64_t ThriftReader::read_varint() {
  const std::size_t start = position_;
  if (const std::optional<std::uint64_t> value = loco::data::read_varint(bytes_, position_)) return *value;
  if (position_ - start < 10) throw ThriftError("the bytes end in the middle of a value", true);
  throw ThriftError("an integer of more than 10 bytes", false);
}

std::int64_t ThriftReader::read_zigzag() { return zigzag_decode(read_varint()); }

std::size_t ThriftReader::checked_count(std::uint64_t count) {
  // Every element takes at least one byte, but for booleans in a map's header: none of Parquet's.
  if (count > bytes_.size() - position_) {
    throw ThriftError(fmt::format("{} elements or bytes announced where {} bytes remain", count,
                                  bytes_.size() - position_),
                      true);
  }
  return static_cast<std::size_t>(count);
}

void ThriftReader::read_struct(const std::function<void(int id, std::uint8_t type)>& on_field) {
  Level level(*this);
  int last_id = 0;
  for (;;) {
    const std::uint8_t header = read_byte();
    const std::uint8_t type = header & 0x0F;
    if (type == kThriftStop) return;
    const int delta = header >> 4;
    const int id = delta != 0 ? last_id + delta : static_cast<int>(read_zigzag());
    if (type > kThriftStruct) throw ThriftError(fmt::format("field {} has the unknown type {}", id, type), false);
    on_field(id, type);
    last_id = id;
  }
}

std::int64_t ThriftReader::read_int(std::uint8_t type) {
  switch (type) {
    case kThriftTrue:
      return 1;
    case kThriftFalse:
      return 0;
    case kThriftByte:
      return static_cast<std::int8_t>(read_byte());
    case kThriftI16:
    case kThriftI32:
    case kThriftI64:
      return read_zigzag();
    default:
      throw ThriftError(fmt::format("an integer where a value of type {} stands", type), false);
  }
}

std::string_view ThriftReader::read_binary() {
  const std::size_t length = checked_count(read_varint());
  const std::string_view value = bytes_.substr(position_, length);
  position_ += length;
  return value;
}

void ThriftReader::read_list(const std::function<void(std::uint8_t element_type)>& on_element) {
  Level level(*this);
  const std::uint8_t header = read_byte();
  const std::uint8_t element_type = header & 0x0F;
  const std::size_t count = checked_count((header >> 4) == 15 ? read_varint() : header >> 4);
  for (std::size_t i = 0; i < count; ++i) on_element(element_type);
}

void ThriftReader::skip(std::uint8_t type) {
  switch (type) {
    case kThriftTrue:
    case kThriftFalse:
      return;  // a field's boolean is in its header
    case kThriftByte:
      read_byte();
      return;
    case kThriftI16:
    case kThriftI32:
    case kThriftI64:
      read_varint();
      return;
    case kThriftDouble:
      for (int i = 0; i < 8; ++i) read_byte();
      return;
    case kThriftBinary:
      read_binary();
      return;
    case kThriftList:
    case kThriftSet:
      read_list([this](std::uint8_t element) { skip_element(element); });
      return;
    case kThriftMap: {
      Level level(*this);
      const std::size_t count = checked_count(read_varint());
      if (count == 0) return;
      const std::uint8_t types = read_byte();
      for (std::size_t i = 0; i < count; ++i) {
        skip_element(types >> 4);
        skip_element(types & 0x0F);
      }
      return;
    }
    case kThriftStruct:
      read_struct([this](int, std::uint8_t field_type) { skip(field_type); });
      return;
    default:
      throw ThriftError(fmt::format("a value of the unknown type {}", type), false);
  }
}

void ThriftReader::skip_element(std::uint8_t type) {
  // In a list or map a boolean is a byte of its own, not a field header's half.
  if (type == kThriftTrue || type == kThriftFalse) {
    read_byte();
  } else {
    skip(type);
  }
}

}  // namespace loco::data
