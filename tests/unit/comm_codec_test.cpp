// Value codecs (src/loco/comm/codecs): exact bytes for hand-checked blocks, round-trip error within
// each codec's documented bound, sizes, zero and non-finite blocks, and bad names.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "loco/comm/codecs/codec.h"
#include "loco/util/error.h"

namespace loco::comm {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::uint8_t kGuard = 0xA5;  // fills the bytes after an encoding, which must stay untouched

// encode() into a buffer with guard bytes after encoded_bytes(); checks they survive.
Bytes encode(const Codec& codec, const std::vector<float>& values) {
  const std::size_t size = codec.encoded_bytes(values.size());
  Bytes out(size + 16, kGuard);
  codec.encode(values.data(), values.size(), out.data());
  for (std::size_t i = size; i < out.size(); ++i) EXPECT_EQ(out[i], kGuard) << "encode wrote past its size at " << i;
  out.resize(size);
  return out;
}

std::vector<float> decode(const Codec& codec, const Bytes& bytes, std::size_t count) {
  std::vector<float> out(count);
  codec.decode(bytes.data(), count, out.data());
  return out;
}

std::vector<float> round_trip(const Codec& codec, const std::vector<float>& values) {
  return decode(codec, encode(codec, values), values.size());
}

// scale (little-endian fp32) then codes: one block record.
Bytes record(float scale, const Bytes& codes) {
  Bytes bytes(4 + codes.size());
  std::memcpy(bytes.data(), &scale, 4);
  std::copy(codes.begin(), codes.end(), bytes.begin() + 4);
  return bytes;
}

std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

float float_of(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(CommCodec, NamesAndKinds) {
  EXPECT_EQ(codec_names(), (std::vector<std::string>{"fp32", "bf16", "int8", "fp4", "int4"}));
  const std::vector<CodecKind> kinds{CodecKind::kFp32, CodecKind::kBf16, CodecKind::kInt8, CodecKind::kFp4,
                                     CodecKind::kInt4};
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    auto codec = make_codec(codec_names()[i]);
    EXPECT_EQ(codec->name(), codec_names()[i]);
    EXPECT_EQ(codec->kind(), kinds[i]);
    // Values per scale: what a caller aligns its spans to. fp32 and bf16 have no blocks.
    EXPECT_EQ(make_codec(codec_names()[i], 32)->block_size(), i < 2 ? 1u : 32u);
  }
}

TEST(CommCodec, BadNameOrBlockSizeIsConfigError) {
  try {
    make_codec("int3");
    FAIL() << "no error for an unknown codec";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'int3'"), std::string::npos) << message;
    for (const auto& name : codec_names()) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  EXPECT_THROW(make_codec("FP4"), ConfigError);
  EXPECT_THROW(make_codec(""), ConfigError);
  EXPECT_THROW(make_codec("int8", 0), ConfigError);
  // `loco bench allreduce --block-size 2^63-1` reached an internal error in the exchange.
  EXPECT_THROW(make_codec("int8", std::size_t{1} << 63), ConfigError);
  EXPECT_NO_THROW(make_codec("int8", kMaxCodecBlockSize));
  EXPECT_NO_THROW(make_codec("int8", 1));
}

TEST(CommCodec, EncodedBytesAreExact) {
  // Block 128: a full block record is 4 + 128 bytes (int8) or 4 + 64 (4-bit); a partial one is
  // 4 + its codes, an odd 4-bit count rounding up to whole bytes.
  const std::vector<std::size_t> counts{0, 1, 127, 128, 129, 1000};
  const std::vector<std::vector<std::size_t>> expected{
      {0, 4, 508, 512, 516, 4000},           // fp32
      {0, 2, 254, 256, 258, 2000},           // bf16
      {0, 5, 131, 132, 137, 7 * 132 + 108},  // int8: 1000 = 7·128 + 104
      {0, 5, 68, 68, 73, 7 * 68 + 56},       // fp4
      {0, 5, 68, 68, 73, 7 * 68 + 56}};      // int4
  for (std::size_t c = 0; c < expected.size(); ++c) {
    auto codec = make_codec(codec_names()[c]);
    for (std::size_t i = 0; i < counts.size(); ++i) {
      EXPECT_EQ(codec->encoded_bytes(counts[i]), expected[c][i]) << codec->name() << " count " << counts[i];
    }
  }
  // An odd block size: every 4-bit record pads its last nibble.
  EXPECT_EQ(make_codec("int4", 7)->encoded_bytes(15), 2 * (4 + 4) + (4 + 1));
  EXPECT_EQ(make_codec("int8", 7)->encoded_bytes(15), 2 * (4 + 7) + (4 + 1));
  // The 4-bit codecs move at least 7x fewer bytes than fp32 at the default block size.
  for (const char* name : {"fp4", "int4"}) {
    EXPECT_GE(4.0 * 128 * 1000 / make_codec(name)->encoded_bytes(128 * 1000), 7.0) << name;
  }
}

TEST(CommCodec, Int8KnownBlock) {
  // s = 2, step 2/127. q = round(x / 2 · 127), halves away from zero:
  // 1 -> 63.5 -> 64 (0x40); -0.5 -> -31.75 -> -32 (0xE0); 0.25 -> 15.875 -> 16 (0x10);
  // 2 -> 127 (0x7F); -1 -> -63.5 -> -64 (0xC0); 0.004 -> 0.254 -> 0.
  auto codec = make_codec("int8", 6);
  const std::vector<float> values{1.0f, -0.5f, 0.25f, 2.0f, -1.0f, 0.004f};
  const Bytes bytes = encode(*codec, values);
  EXPECT_EQ(bytes, record(2.0f, {0x40, 0xE0, 0x10, 0x7F, 0xC0, 0x00}));
  const std::vector<float> decoded = decode(*codec, bytes, values.size());
  const std::vector<double> expected{64 * 2 / 127.0, -32 * 2 / 127.0, 16 * 2 / 127.0, 2.0, -64 * 2 / 127.0, 0.0};
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(decoded[i], expected[i], 1e-6) << i;
}

TEST(CommCodec, Int4KnownBlocksWithAPartialOne) {
  // Block 4, s = 1, q = round(x · 7): 0.5 -> 3.5 -> 4; -1 -> -7 (0x9); 0.2 -> 1.4 -> 1;
  // 0.8 -> 5.6 -> 6. Bytes 0x94 (4 low, -7 high) and 0x61. The partial block holds -3 alone:
  // s = 3, q = -7, its high nibble padded with 0.
  auto codec = make_codec("int4", 4);
  const std::vector<float> values{0.5f, -1.0f, 0.2f, 0.8f, -3.0f};
  const Bytes bytes = encode(*codec, values);
  EXPECT_EQ(Bytes(bytes.begin(), bytes.begin() + 6), record(1.0f, {0x94, 0x61}));
  EXPECT_EQ(Bytes(bytes.begin() + 6, bytes.end()), record(3.0f, {0x09}));
  const std::vector<float> decoded = decode(*codec, bytes, values.size());
  const std::vector<double> levels{4 / 7.0, -1.0, 1 / 7.0, 6 / 7.0, -3.0};
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(decoded[i], levels[i], 1e-6) << i;
}

TEST(CommCodec, Fp4KnownBlock) {
  // s = 4, so y = |x| / 4 picks the nearest of {0, 2^-6, ..., 1}; code = sign << 3 | e.
  //   4     y = 1        -> e 7                 0.75·4 = 3   y = 0.75 (tie) -> e 7 (1)
  //   2.8   y = 0.7      -> e 6 (0.5)           -1.2         y = 0.3 < 0.375 -> e 5 (0.25), sign: 0xD
  //   0.04  y = 0.01     -> e 1 (2^-6)          2^-5         y = 2^-7 (tie) -> e 1
  //   0.028 y = 0.007    -> e 0                 -0           -> e 0 with the sign: 0x8
  auto codec = make_codec("fp4", 8);
  const std::vector<float> values{4.0f, 3.0f, 2.8f, -1.2f, 0.04f, 0x1p-5f, 0.028f, -0.0f};
  const Bytes bytes = encode(*codec, values);
  EXPECT_EQ(bytes, record(4.0f, {0x77, 0xD6, 0x11, 0x80}));
  const std::vector<float> decoded = decode(*codec, bytes, values.size());
  const std::vector<float> expected{4.0f, 4.0f, 2.0f, -1.0f, 0x1p-4f, 0x1p-4f, 0.0f, -0.0f};
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bits_of(decoded[i]), bits_of(expected[i])) << i << ": " << decoded[i] << " vs " << expected[i];
  }
}

TEST(CommCodec, Fp4LevelsRoundTripExactlyAndMidpointsRoundUp) {
  // Every magnitude 2^-6..2^0 (times s = 3) comes back exactly; just below a midpoint rounds
  // down, at the midpoint up.
  auto codec = make_codec("fp4", 128);
  std::vector<float> values{3.0f};
  std::vector<float> expected{3.0f};
  for (int k = -6; k <= 0; ++k) {
    values.push_back(3.0f * std::ldexp(1.0f, k));
    expected.push_back(values.back());
  }
  for (int k = -6; k < 0; ++k) {
    const float midpoint = 3.0f * 1.5f * std::ldexp(1.0f, k);
    values.push_back(midpoint);
    expected.push_back(3.0f * std::ldexp(1.0f, k + 1));
    values.push_back(std::nextafter(midpoint, 0.0f));
    expected.push_back(3.0f * std::ldexp(1.0f, k));
  }
  const std::vector<float> decoded = round_trip(*codec, values);
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(decoded[i], expected[i]) << values[i];
}

TEST(CommCodec, Bf16RoundsToNearestEven) {
  auto codec = make_codec("bf16");
  // bf16 keeps the top 16 bits of the fp32 pattern. 0x3F808000 lies halfway between 0x3F80 and
  // 0x3F81: ties to the even 0x3F80. 0x3F818000 lies halfway between 0x3F81 and 0x3F82: to 0x3F82.
  // One bit above halfway rounds up. Subnormals follow the same rule (0x00018000 -> 0x0002).
  // FLT_MAX rounds to infinity; a NaN whose payload lies only in the low bits stays a NaN.
  const std::vector<std::uint32_t> inputs{0x3F808000, 0x3F818000, 0x3F808001, 0xBF808000, 0xBF818000, 0x00008000,
                                          0x00018000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0xFF800001, 0x3F7FFFFF};
  const std::vector<std::uint16_t> expected{0x3F80, 0x3F82, 0x3F81, 0xBF80, 0xBF82, 0x0000,
                                            0x0002, 0x7F80, 0x7F80, 0x7FC0, 0xFFC0, 0x3F80};
  std::vector<float> values;
  for (std::uint32_t bits : inputs) values.push_back(float_of(bits));
  const Bytes bytes = encode(*codec, values);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::uint16_t h = static_cast<std::uint16_t>(bytes[2 * i] | bytes[2 * i + 1] << 8);
    EXPECT_EQ(h, expected[i]) << std::hex << "input 0x" << inputs[i];
  }
  const std::vector<float> decoded = decode(*codec, bytes, values.size());
  EXPECT_EQ(decoded[0], 1.0f);
  EXPECT_EQ(decoded[1], 1.015625f);
  EXPECT_TRUE(std::isnan(decoded[9]));
  EXPECT_TRUE(std::isnan(decoded[10]) && std::signbit(decoded[10]));
  EXPECT_EQ(decoded[7], kInf);
}

// Test data: `count` values of one distribution, with blocks of `block` in mind for "mixed".
std::vector<float> sample(const std::string& distribution, std::size_t count, std::size_t block, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::cauchy_distribution<double> cauchy(0.0, 1.0);
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (distribution == "normal") values[i] = normal(rng);
    if (distribution == "heavy") values[i] = static_cast<float>(std::clamp(cauchy(rng), -1e30, 1e30));
    if (distribution == "tiny") values[i] = normal(rng) * 1e-30f;
    if (distribution == "subnormal") values[i] = normal(rng) * 1e-41f;
    // Blocks from 1e-6 to 1e6 in turn, so that each block's scale matters.
    if (distribution == "mixed") values[i] = normal(rng) * std::pow(10.0f, static_cast<float>(i / block % 13) - 6);
  }
  return values;
}

// The largest |value| in each value's block.
std::vector<double> block_absmax(const std::vector<float>& values, std::size_t block) {
  std::vector<double> absmax(values.size());
  for (std::size_t first = 0; first < values.size(); first += block) {
    const std::size_t end = std::min(values.size(), first + block);
    double largest = 0;
    for (std::size_t i = first; i < end; ++i) largest = std::max(largest, std::fabs(double{values[i]}));
    for (std::size_t i = first; i < end; ++i) absmax[i] = largest;
  }
  return absmax;
}

TEST(CommCodec, RoundTripErrorWithinBound) {
  std::mt19937 rng(7);
  for (const auto& name : codec_names()) {
    for (std::size_t block : {1, 7, 32, 128}) {
      auto codec = make_codec(name, block);
      for (const char* distribution : {"normal", "heavy", "tiny", "subnormal", "mixed"}) {
        const std::size_t large = std::max<std::size_t>(50 * block, 1000) + 3;
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, block - 1, block, block + 1, large}) {
          SCOPED_TRACE(fmt::format("{} block {} {} count {}", name, block, distribution, count));
          const std::vector<float> values = sample(distribution, count, block, rng);
          const std::vector<float> decoded = round_trip(*codec, values);
          const std::vector<double> absmax = block_absmax(values, block);
          for (std::size_t i = 0; i < count; ++i) {
            const double error = std::fabs(double{decoded[i]} - values[i]);
            const double bound = codec->error_bound(std::fabs(values[i]), absmax[i]);
            ASSERT_LE(error, bound) << "value " << i << ": " << values[i] << " -> " << decoded[i];
          }
        }
      }
    }
  }
}

TEST(CommCodec, ErrorBoundIsNearlyReached) {
  // A bound far above the real error would let any codec pass the test above.
  std::mt19937 rng(11);
  const std::vector<float> values = sample("normal", 100 * 128, 128, rng);
  const std::vector<double> absmax = block_absmax(values, 128);
  for (const auto& name : codec_names()) {
    if (name == "fp32") continue;  // exact: bound 0
    auto codec = make_codec(name);
    const std::vector<float> decoded = round_trip(*codec, values);
    double worst = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double error = std::fabs(double{decoded[i]} - values[i]);
      worst = std::max(worst, error / codec->error_bound(std::fabs(values[i]), absmax[i]));
    }
    EXPECT_GT(worst, 0.9) << name;
    EXPECT_LE(worst, 1.0) << name;
  }
  EXPECT_EQ(round_trip(*make_codec("fp32"), values), values);
}

TEST(CommCodec, DecodeAddAddsToTheSum) {
  std::mt19937 rng(3);
  for (const auto& name : codec_names()) {
    SCOPED_TRACE(name);
    auto codec = make_codec(name, 32);
    const std::vector<float> values = sample("normal", 32 * 5 + 9, 32, rng);
    const Bytes bytes = encode(*codec, values);
    const std::vector<float> decoded = decode(*codec, bytes, values.size());
    const std::vector<float> start = sample("normal", values.size(), 32, rng);
    std::vector<float> sum = start;
    codec->decode_add(bytes.data(), values.size(), sum.data());
    codec->decode_add(bytes.data(), values.size(), sum.data());
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_FLOAT_EQ(sum[i], start[i] + decoded[i] + decoded[i]) << i;
    codec->decode_add(bytes.data(), 0, sum.data());  // nothing to add
  }
}

TEST(CommCodec, PartialLastBlockHasItsOwnScale) {
  // Four values of size 1 then one of 0.001: the last block's scale is 0.001, not 1, so it
  // decodes almost exactly (an off-by-one in the block boundaries would decode it as 0 or 1).
  for (const auto& name : codec_names()) {
    auto codec = make_codec(name, 4);
    const std::vector<float> values{1.0f, -1.0f, 1.0f, -1.0f, 0.001f};
    const std::vector<float> decoded = round_trip(*codec, values);
    EXPECT_NEAR(decoded[4], 0.001f, 0.001 * 0x1p-8) << name;
    EXPECT_NEAR(decoded[1], -1.0f, 1e-6) << name;
  }
}

TEST(CommCodec, ZeroBlockDecodesToExactZeros) {
  for (const auto& name : codec_names()) {
    auto codec = make_codec(name, 4);
    const std::vector<float> values{0.5f, 1.0f, -2.0f, 0.25f, 0.0f, -0.0f, 0.0f, 0.0f, 3.0f, 0.0f};
    const Bytes bytes = encode(*codec, values);
    const std::vector<float> decoded = decode(*codec, bytes, values.size());
    for (std::size_t i = 4; i < 8; ++i) EXPECT_EQ(decoded[i], 0.0f) << name << " value " << i;
    EXPECT_EQ(decoded[9], 0.0f) << name;
    EXPECT_NEAR(decoded[8], 3.0f, 1e-6) << name;
    EXPECT_NEAR(decoded[2], -2.0f, 1e-6) << name;
    if (name != "fp32" && name != "bf16") {  // the zero block's record: scale 0, codes 0
      const std::size_t record = codec->encoded_bytes(4);
      EXPECT_EQ(Bytes(bytes.begin() + record, bytes.begin() + 2 * record), Bytes(record, 0)) << name;
    }
  }
}

TEST(CommCodec, NonFiniteValuePoisonsItsBlockOnly) {
  // Block codecs: a block holding inf or NaN decodes to NaN throughout (its scale is NaN), so the
  // sum it reaches shows the divergence; other blocks are unaffected. fp32 and bf16 keep inf and
  // NaN as they are.
  const std::vector<float> values{1.0f, kInf, 2.0f, 0.5f, 1.0f, 2.0f, 3.0f, 4.0f, 0.0f, 0.0f, kNaN, -kInf};
  for (const auto& name : codec_names()) {
    SCOPED_TRACE(name);
    auto codec = make_codec(name, 4);
    const std::vector<float> decoded = round_trip(*codec, values);
    for (std::size_t i = 4; i < 8; ++i)
      EXPECT_LE(std::fabs(decoded[i] - values[i]), codec->error_bound(values[i], 4)) << i;
    if (name == "fp32" || name == "bf16") {
      EXPECT_EQ(decoded[1], kInf);
      EXPECT_EQ(decoded[11], -kInf);
      EXPECT_TRUE(std::isnan(decoded[10]));
      EXPECT_EQ(decoded[0], 1.0f);
    } else {
      for (std::size_t i : {0, 1, 2, 3, 8, 9, 10, 11}) EXPECT_TRUE(std::isnan(decoded[i])) << i << ": " << decoded[i];
      const Bytes bytes = encode(*codec, values);
      EXPECT_TRUE(std::isnan(float_of(bytes[0] | bytes[1] << 8 | bytes[2] << 16 | std::uint32_t{bytes[3]} << 24)))
          << "the scale of a block with an inf";
      std::vector<float> sum(values.size(), 1.0f);
      codec->decode_add(bytes.data(), values.size(), sum.data());
      EXPECT_TRUE(std::isnan(sum[0]));
      EXPECT_FLOAT_EQ(sum[4], 1.0f + decoded[4]);
    }
  }
}

TEST(CommCodec, SignSymmetry) {
  // One block holds x and then -x, so both halves share the scale. fp4 flips exactly the sign bit
  // (bit 3 of each code); every codec decodes -x to minus what x decodes to.
  std::mt19937 rng(5);
  std::vector<float> values = sample("heavy", 64, 128, rng);
  values.push_back(0.0f);
  const std::size_t half = values.size();
  for (std::size_t i = 0; i < half; ++i) values.push_back(-values[i]);
  for (const auto& name : codec_names()) {
    auto codec = make_codec(name, 256);
    const Bytes bytes = encode(*codec, values);
    const std::vector<float> decoded = decode(*codec, bytes, values.size());
    for (std::size_t i = 0; i < half; ++i) EXPECT_EQ(decoded[half + i], -decoded[i]) << name << " " << values[i];
    if (name == "fp4") {  // half = 65: code i is nibble i of the bytes after the scale
      auto code = [&](std::size_t i) { return (bytes[4 + i / 2] >> (i % 2 * 4)) & 0xF; };
      for (std::size_t i = 0; i < half; ++i) EXPECT_EQ(code(half + i), code(i) ^ 0x8) << values[i];
    }
  }
}

TEST(CommCodec, UnalignedBuffersWork) {
  // The bytes travel in larger messages: an encoding may start at any offset.
  std::mt19937 rng(9);
  const std::vector<float> values = sample("normal", 300, 128, rng);
  for (const auto& name : codec_names()) {
    auto codec = make_codec(name);
    const Bytes aligned = encode(*codec, values);
    Bytes shifted(aligned.size() + 3);
    codec->encode(values.data(), values.size(), shifted.data() + 3);
    EXPECT_EQ(Bytes(shifted.begin() + 3, shifted.end()), aligned) << name;
    std::vector<float> decoded(values.size());
    codec->decode(shifted.data() + 3, values.size(), decoded.data());
    EXPECT_EQ(decoded, decode(*codec, aligned, values.size())) << name;
  }
}

TEST(CommCodec, EncodingIsTheSameOnEveryMachine) {
  // Inputs from integer arithmetic only (no library distributions, which differ between standard
  // libraries): 1000 values of 24-bit mantissas over 16 binades, blocks of 32 (the last partial).
  // The FNV-1a hashes of the encodings agree with an independent reference written from
  // docs/codecs.md (numpy float32 arithmetic, torch's bfloat16 cast). A change means the wire
  // format changed: update docs/codecs.md and these numbers together, never one alone.
  std::vector<float> values(1000);
  std::uint64_t state = 12345;
  for (auto& value : values) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    const auto mantissa = static_cast<std::int32_t>(state >> 40) - (1 << 23);
    value = std::ldexp(static_cast<float>(mantissa), static_cast<int>(state >> 20 & 15) - 30);
  }
  const std::vector<std::uint64_t> expected{18194319003518471782u, 16639342120321353368u, 10213601897044306467u,
                                            8342938692552508067u, 8564388931175257389u};
  for (std::size_t c = 0; c < expected.size(); ++c) {
    auto codec = make_codec(codec_names()[c], 32);
    std::uint64_t hash = 14695981039346656037u;
    for (std::uint8_t byte : encode(*codec, values)) hash = (hash ^ byte) * 1099511628211u;
    EXPECT_EQ(hash, expected[c]) << codec->name();
  }
}

}  // namespace
}  // namespace loco::comm
