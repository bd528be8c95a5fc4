// Reading Thrift's compact protocol, in which Parquet writes its footer and page headers (parquet_text.h):
// structs of numbered, typed fields, read field by field so that a reader takes the fields it knows and skips
// the rest. The bytes come from a file anyone may have written, so every read is bounded: a varint by 10
// bytes, a string or list by the bytes that remain, nesting by kMaxThriftDepth; anything else is ThriftError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string_view>

namespace loco::data {

// The bytes are not compact-protocol Thrift, or end before what they announce. `ended_early` tells a reader
// that more bytes might have completed them (a page header read through a window of the file).
class ThriftError : public std::runtime_error {
 public:
  ThriftError(const std::string& what, bool ended_early) : std::runtime_error(what), ended_early_(ended_early) {}
  bool ended_early() const { return ended_early_; }

 private:
  bool ended_early_;
};

// The compact protocol's types (the low half of a field's header byte).
enum ThriftType : std::uint8_t {
  kThriftStop = 0,
  kThriftTrue = 1,
  kThriftFalse = 2,
  kThriftByte = 3,
  kThriftI16 = 4,
  kThriftI32 = 5,
  kThriftI64 = 6,
  kThriftDouble = 7,
  kThriftBinary = 8,
  kThriftList = 9,
  kThriftSet = 10,
  kThriftMap = 11,
  kThriftStruct = 12,
};

// Far deeper than Parquet's structs nest (a page header: 3 levels).
inline constexpr int kMaxThriftDepth = 32;

class ThriftReader {
 public:
  explicit ThriftReader(std::string_view bytes) : bytes_(bytes) {}

  // Reads a struct to its stop byte: `on_field` is called with each field's id and type and must consume the
  // value, with read_int, read_binary, read_list or read_struct, or skip(type).
  void read_struct(const std::function<void(int id, std::uint8_t type)>& on_field);
  // An integer field of any integer type, or a boolean field (0 or 1).
  std::int64_t read_int(std::uint8_t type);
  std::string_view read_binary();
  // A list (or set): calls `on_element` with the element type once per element, to consume it.
  void read_list(const std::function<void(std::uint8_t element_type)>& on_element);
  void skip(std::uint8_t type);

  std::size_t position() const { return position_; }

 private:
  std::uint8_t read_byte();
  std::uint64_t read_varint();
  std::int64_t read_zigzag();
  // The number of elements a list or map announces, refused when the bytes left could not hold them.
  std::size_t checked_count(std::uint64_t count);
  void skip_element(std::uint8_t type);
  // Counts nesting for the lifetime of one struct, list or map.
  class Level;

  std::string_view bytes_;
  std::size_t position_ = 0;
  int depth_ = 0;
};

}  // namespace loco::data
