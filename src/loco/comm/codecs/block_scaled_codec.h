// The block layout shared by int8, int4 and fp4 (docs/codecs.md): values are cut into blocks of
// block_size (the last may be shorter); each block is one record, its scale s (the block's largest
// |value|, little-endian fp32) followed by one code per value, 8 bits each or two 4-bit codes per
// byte (the earlier value in the low nibble; an odd block pads its last high nibble with 0).
//
// A Format says how one value becomes a code and back:
//   kKind, kName, kBits (8 or 4)
//   encode(x, s) -> code   for |x| <= s, 0 < s < inf; 4-bit codes in the low nibble
//   level(code) -> float   decoded value = level(code) * step(s)
//   step(s)     -> float
//   error_bound(x_abs, s)  the format's rounding error, before fp32 round-off (added here)
//
// Blocks that need no division (note "block-scale"): a block of zeros gets s = 0 and zero codes,
// which decode to exact zeros; a block holding an inf or NaN gets s = NaN and zero codes, so all
// its values decode to NaN and the caller sees the divergence in its sum.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "loco/comm/codecs/codec.h"

namespace loco::comm {

template <class Format>
class BlockScaledCodec final : public Codec {
 public:
  explicit BlockScaledCodec(std::size_t block_size) : block_size_(block_size) {}

  CodecKind kind() const override { return Format::kKind; }
  std::string_view name() const override { return Format::kName; }
  std::size_t block_size() const override { return block_size_; }

  std::size_t encoded_bytes(std::size_t count) const override {
    const std::size_t rest = count % block_size_;
    return count / block_size_ * record_bytes(block_size_) + (rest > 0 ? record_bytes(rest) : 0);
  }

  void encode(const float* values, std::size_t count, std::uint8_t* out) const override {
    for_each_block(count, [&](std::size_t first, std::size_t n, std::size_t offset) {
      encode_block(values + first, n, out + offset);
    });
  }

  void decode(const std::uint8_t* in, std::size_t count, float* out) const override {
    for_each_block(count, [&](std::size_t first, std::size_t n, std::size_t offset) {
      decode_block(in + offset, n, out + first, [](float& to, float value) { to = value; });
    });
  }

  void decode_add(const std::uint8_t* in, std::size_t count, float* sum) const override {
    for_each_block(count, [&](std::size_t first, std::size_t n, std::size_t offset) {
      decode_block(in + offset, n, sum + first, [](float& to, float value) { to += value; });
    });
  }

  // fp32 round-off of the division, the level and the decoding multiply stays below 2^-20·s;
  // 2^-142 covers a step s/L that is subnormal (s < 2^-119), where round-off is absolute.
  double error_bound(double x_abs, double block_absmax) const override {
    if (!std::isfinite(block_absmax)) return std::numeric_limits<double>::infinity();
    return Format::error_bound(x_abs, block_absmax) + block_absmax * 0x1p-20 + 0x1p-142;
  }

 private:
  static constexpr std::size_t code_bytes(std::size_t n) { return Format::kBits == 8 ? n : (n + 1) / 2; }
  static constexpr std::size_t record_bytes(std::size_t n) { return sizeof(float) + code_bytes(n); }

  // Calls visit(first value, values in the block, byte offset of its record) for every block.
  template <class Visit>
  void for_each_block(std::size_t count, Visit visit) const {
    std::size_t offset = 0;
    for (std::size_t first = 0; first < count; first += block_size_) {
      const std::size_t n = std::min(block_size_, count - first);
      visit(first, n, offset);
      offset += record_bytes(n);
    }
  }

  // The largest |x| of the block, or NaN if the block holds an inf or NaN. Compared as integers:
  // |x|'s bit pattern orders like its value, with inf and NaN above every finite value (and, below
  // 2^31, signed comparison suffices, which vectorises better than unsigned).
  static float block_scale(const float* x, std::size_t n) {
    std::int32_t largest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, x + i, sizeof bits);
      largest = std::max(largest, static_cast<std::int32_t>(bits & 0x7FFFFFFFu));
    }
    if (largest >= 0x7F800000) return std::numeric_limits<float>::quiet_NaN();
    float scale;
    std::memcpy(&scale, &largest, sizeof scale);
    return scale;
  }

  static void encode_block(const float* x, std::size_t n, std::uint8_t* record) {
    const float s = block_scale(x, n);
    std::memcpy(record, &s, sizeof s);
    std::uint8_t* codes = record + sizeof s;
    if (!(s > 0)) {  // zero or NaN: note "block-scale" above
      std::memset(codes, 0, code_bytes(n));
      return;
    }
    if constexpr (Format::kBits == 8) {
      for (std::size_t i = 0; i < n; ++i) codes[i] = Format::encode(x[i], s);
    } else {
      const std::size_t pairs = n / 2;
      for (std::size_t i = 0; i < pairs; ++i) {
        codes[i] = static_cast<std::uint8_t>(Format::encode(x[2 * i], s) | Format::encode(x[2 * i + 1], s) << 4);
      }
      if (n % 2 == 1) codes[pairs] = Format::encode(x[n - 1], s);
    }
  }

  template <class Store>
  static void decode_block(const std::uint8_t* record, std::size_t n, float* out, Store store) {
    float s;
    std::memcpy(&s, record, sizeof s);
    const float step = Format::step(s);
    const std::uint8_t* codes = record + sizeof s;
    if constexpr (Format::kBits == 8) {
      for (std::size_t i = 0; i < n; ++i) store(out[i], Format::level(codes[i]) * step);
    } else {
      const std::size_t pairs = n / 2;
      for (std::size_t i = 0; i < pairs; ++i) {
        store(out[2 * i], Format::level(codes[i] & 0x0F) * step);
        store(out[2 * i + 1], Format::level(codes[i] >> 4) * step);
      }
      if (n % 2 == 1) store(out[n - 1], Format::level(codes[pairs] & 0x0F) * step);
    }
  }

  std::size_t block_size_;
};

}  // namespace loco::comm
