#include "loco/comm/codecs/float_codecs.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "loco/comm/codecs/float_bits.h"

namespace loco::comm {

namespace {

// The top 16 bits of the fp32 rounded to nearest, ties to even, by integer arithmetic on the bit
// pattern (exact for normals, subnormals and overflow to infinity). A NaN would round to infinity
// when its payload lies only in the low bits, so NaNs are truncated and made quiet instead.
std::uint16_t to_bf16(float x) {
  const std::uint32_t bits = bits_of(x);
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  const bool is_nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<std::uint16_t>(is_nan ? quiet_nan : rounded);
}

float from_bf16(std::uint16_t h) { return float_of(std::uint32_t{h} << 16); }

class Fp32Codec final : public Codec {
 public:
  CodecKind kind() const override { return CodecKind::kFp32; }
  std::string_view name() const override { return "fp32"; }
  std::size_t block_size() const override { return 1; }
  std::size_t encoded_bytes(std::size_t count) const override { return count * sizeof(float); }
  void encode(const float* values, std::size_t count, std::uint8_t* out) const override {
    if (count > 0) std::memcpy(out, values, count * sizeof(float));
  }
  void decode(const std::uint8_t* in, std::size_t count, float* out) const override {
    if (count > 0) std::memcpy(out, in, count * sizeof(float));
  }
  void decode_add(const std::uint8_t* in, std::size_t count, float* sum) const override {
    for (std::size_t i = 0; i < count; ++i) {
      float value;
      std::memcpy(&value, in + i * sizeof(float), sizeof value);
      sum[i] += value;
    }
  }
  double error_bound(double, double) const override { return 0; }
};

class Bf16Codec final : public Codec {
 public:
  CodecKind kind() const override { return CodecKind::kBf16; }
  std::string_view name() const override { return "bf16"; }
  std::size_t block_size() const override { return 1; }
  std::size_t encoded_bytes(std::size_t count) const override { return count * sizeof(std::uint16_t); }
  void encode(const float* values, std::size_t count, std::uint8_t* out) const override {
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint16_t h = to_bf16(values[i]);
      std::memcpy(out + i * sizeof h, &h, sizeof h);
    }
  }
  void decode(const std::uint8_t* in, std::size_t count, float* out) const override {
    for (std::size_t i = 0; i < count; ++i) out[i] = load(in, i);
  }
  void decode_add(const std::uint8_t* in, std::size_t count, float* sum) const override {
    for (std::size_t i = 0; i < count; ++i) sum[i] += load(in, i);
  }
  // 8 significant bits: half an ulp is at most 2^-8·|x| for normals and 2^-134 (half the spacing
  // 2^-133 of bf16 subnormals) below. From (2 - 2^-8)·2^127 up, x rounds to infinity.
  double error_bound(double x_abs, double) const override {
    if (x_abs >= 0x1.FFp127) return std::numeric_limits<double>::infinity();
    return x_abs * 0x1p-8 + 0x1p-134;
  }

 private:
  static float load(const std::uint8_t* in, std::size_t i) {
    std::uint16_t h;
    std::memcpy(&h, in + i * sizeof h, sizeof h);
    return from_bf16(h);
  }
};

}  // namespace

std::unique_ptr<Codec> make_fp32_codec() { return std::make_unique<Fp32Codec>(); }
std::unique_ptr<Codec> make_bf16_codec() { return std::make_unique<Bf16Codec>(); }

}  // namespace loco::comm
