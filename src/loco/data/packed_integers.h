// The integer encodings that Thrift's compact protocol, Parquet and Arrow share (thrift_compact.h,
// parquet_encodings.h, arrow_text.h): LEB128 varints, zigzag signs, little-endian integers and bit-packing, each
// read from bytes a stranger may have written, so that none reads past them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loco::data {

// The unsigned LEB128 varint at `position` (moved past it); nullopt when the bytes end inside it or it runs
// over 10 bytes (more than 64 bits).
inline std::optional<std::uint64_t> read_varint(std::string_view bytes, std::size_t& position) {
  std::uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (position >= bytes.size()) return std::nullopt;
    const auto byte = static_cast<std::uint8_t>(bytes[position++]);
    value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

// A zigzag-encoded signed integer: 0, 1, 2, 3 … stand for 0, -1, 1, -2 …
inline std::int64_t zigzag_decode(std::uint64_t raw) {
  return static_cast<std::int64_t>(raw >> 1) ^ -static_cast<std::int64_t>(raw & 1);
}

// The little-endian integer of N bytes at the start of `bytes`; nullopt when they hold fewer.
template <typename Unsigned>
std::optional<Unsigned> read_little_endian(std::string_view bytes) {
  if (bytes.size() < sizeof(Unsigned)) return std::nullopt;
  Unsigned value = 0;
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) {
    value |= static_cast<Unsigned>(static_cast<std::uint8_t>(bytes[i])) << (8 * i);
  }
  return value;
}
inline std::optional<std::uint32_t> read_le32(std::string_view bytes) {
  return read_little_endian<std::uint32_t>(bytes);
}
inline std::optional<std::uint64_t> read_le64(std::string_view bytes) {
  return read_little_endian<std::uint64_t>(bytes);
}

// `width` bits from bit `bit` of `data` on, the lowest first (Parquet's bit packing); the caller has checked
// that they lie within `data`.
inline std::uint64_t unpack_bits(std::string_view data, std::uint64_t bit, int width) {
  std::uint64_t value = 0;
  for (int b = 0; b < width; ++b, ++bit) {
    const auto byte = static_cast<std::uint8_t>(data[static_cast<std::size_t>(bit / 8)]);
    value |= static_cast<std::uint64_t>((byte >> (bit % 8)) & 1) << b;
  }
  return value;
}

}  // namespace loco::data
