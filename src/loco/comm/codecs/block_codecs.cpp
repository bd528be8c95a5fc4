#include "loco/comm/codecs/block_codecs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loco/comm/codecs/block_scaled_codec.h"
#include "loco/comm/codecs/float_bits.h"

namespace loco::comm {

namespace {

// Symmetric uniform levels -L..L with step s/L: q = round(x / s · L), halves away from zero.
template <int L>
struct UniformLevels {
  // round(f) = floor((floor(2f) + 1) / 2) for f >= 0: integer arithmetic after one float-to-int
  // truncation. The usual f + 0.5 is a float add after a multiply, which compilers may fuse into
  // an FMA on some machines, rounding differently there. The sign goes back on as two's complement.
  static std::int32_t quantise(float x, float s) {
    const float twice = std::fabs(x) / s * (2 * L);  // <= 2L since |x| <= s
    const std::int32_t magnitude = (static_cast<std::int32_t>(twice) + 1) >> 1;
    const std::int32_t negative = -static_cast<std::int32_t>(bits_of(x) >> 31);  // 0 or -1
    return (magnitude ^ negative) - negative;
  }
  static float step(float s) { return s / L; }
  // Half a step.
  static double error_bound(double, double s) { return s / (2 * L); }
};

// int8: q in -127..127 as a two's complement byte.
struct Int8Format : UniformLevels<127> {
  static constexpr CodecKind kKind = CodecKind::kInt8;
  static constexpr std::string_view kName = "int8";
  static constexpr int kBits = 8;
  static std::uint8_t encode(float x, float s) { return static_cast<std::uint8_t>(quantise(x, s)); }
  static float level(std::uint8_t code) { return static_cast<std::int8_t>(code); }
};

// int4: q in -7..7 as a two's complement nibble (0x8, -8, is never written).
struct Int4Format : UniformLevels<7> {
  static constexpr CodecKind kKind = CodecKind::kInt4;
  static constexpr std::string_view kName = "int4";
  static constexpr int kBits = 4;
  static std::uint8_t encode(float x, float s) { return static_cast<std::uint8_t>(quantise(x, s) & 0x0F); }
  static float level(std::uint8_t code) { return static_cast<float>((code ^ 8) - 8); }  // sign-extends
};

// fp4 E3M0: code = sign << 3 | e; magnitude 0 for e = 0, else 2^(e-7), so {0, 2^-6, ..., 2^0}·s.
struct Fp4Format {
  static constexpr CodecKind kKind = CodecKind::kFp4;
  static constexpr std::string_view kName = "fp4";
  static constexpr int kBits = 4;

  static std::uint8_t encode(float x, float s) {
    const float y = std::fabs(x) / s;  // in [0, 1]
    // The nearest power of two 2^(e-7) to y, ties up: adding 2^22 (half the mantissa range) to y's
    // bits carries into the exponent exactly when y >= 1.5·2^j, the midpoint of 2^j and 2^(j+1).
    // 2^(e-7) has the biased exponent e + 120.
    const std::int32_t nearest = static_cast<std::int32_t>((bits_of(y) + 0x400000u) >> 23) - 120;
    // Below 2^-6 the neighbours are 0 and 2^-6, whose midpoint is 2^-7.
    const std::int32_t e = std::max(nearest, y >= 0x1p-7f ? 1 : 0);
    return static_cast<std::uint8_t>((bits_of(x) >> 31) << 3 | static_cast<std::uint32_t>(e));
  }

  // Built as fp32 bits: biased exponent e - 7 + 127, no mantissa; the sign from bit 3.
  static float level(std::uint8_t code) {
    const std::uint32_t e = code & 7u;
    const std::uint32_t bits = (e == 0 ? 0 : (e + 120) << 23) | std::uint32_t{code & 8u} << 28;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  static float step(float s) { return s; }

  // With y = |x|/s between magnitudes 2^j and 2^(j+1), the error is at most y/3 (worst at the
  // midpoint 1.5·2^j); below 2^-6 it is at most 2^-7 (worst at the midpoint 2^-7). Times s.
  static double error_bound(double x_abs, double s) { return std::max(x_abs / 3, s * 0x1p-7); }
};

}  // namespace

std::unique_ptr<Codec> make_int8_codec(std::size_t block_size) {
  return std::make_unique<BlockScaledCodec<Int8Format>>(block_size);
}
std::unique_ptr<Codec> make_int4_codec(std::size_t block_size) {
  return std::make_unique<BlockScaledCodec<Int4Format>>(block_size);
}
std::unique_ptr<Codec> make_fp4_codec(std::size_t block_size) {
  return std::make_unique<BlockScaledCodec<Fp4Format>>(block_size);
}

}  // namespace loco::comm
