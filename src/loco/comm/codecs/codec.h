// Value codecs: fp32 values to bytes and back, independent of any transport (docs/design.md §3 "Group").
//
// A quantised all-reduce encodes each rank's chunk, sends the bytes, and the receiver decodes and
// sums in fp32 (decode_add); the reduced chunk is encoded once more and all-gathered
// (docs/algorithm-reference.md §4 point 3). Formats, error bounds and sizes: docs/codecs.md.
//
// Codecs are stateless and thread-safe. encode/decode run over whole tensors: no allocation and no
// virtual call per value. Encoding is deterministic and bit-identical on every machine (explicit
// rounding, no floating-point add after a multiply that a compiler could fuse into an FMA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "codec byte layouts are little-endian (docs/codecs.md)");

namespace loco::comm {

enum class CodecKind { kFp32, kBf16, kInt8, kFp4, kInt4 };

class Codec {
 public:
  virtual ~Codec() = default;
  virtual CodecKind kind() const = 0;
  virtual std::string_view name() const = 0;  // "fp32", "bf16", "int8", "fp4", "int4"
  // Values per scale (1 for fp32 and bf16): spans that start on a multiple of it are encoded in the
  // same blocks as the whole tensor would be.
  virtual std::size_t block_size() const = 0;

  // Bytes that encode() writes for `count` values: codes plus per-block scales. 0 for 0 values.
  virtual std::size_t encoded_bytes(std::size_t count) const = 0;
  // Writes encoded_bytes(count) bytes to `out`.
  virtual void encode(const float* values, std::size_t count, std::uint8_t* out) const = 0;
  // Reads encoded_bytes(count) bytes (any alignment) and writes `count` values.
  virtual void decode(const std::uint8_t* in, std::size_t count, float* out) const = 0;
  // sum[i] += decoded value i. The add may be fused with the decoding multiply on machines with
  // FMA, so sums can differ in the last bit between machines; decode() is the same everywhere.
  virtual void decode_add(const std::uint8_t* in, std::size_t count, float* sum) const = 0;

  // Worst-case |decode(encode(x)) - x| for a finite x with |x| = x_abs in a block whose largest
  // |value| is block_absmax (ignored by fp32 and bf16). Infinite where x rounds to infinity (bf16)
  // or block_absmax is not finite.
  virtual double error_bound(double x_abs, double block_absmax) const = 0;
};

// block_size: values per scale for int8, fp4 and int4 (fp32 and bf16 have no scales). Throws
// ConfigError naming the valid names for an unknown name, and for block_size 0.
// A block's scale covers at most this many values: 2^20 is already a whole small tensor per scale (no gain in
// bytes over 4096), and a size near 2^63 overflowed the encoded size (0 bytes sent, replicas apart).
inline constexpr std::size_t kMaxCodecBlockSize = std::size_t{1} << 20;
std::unique_ptr<Codec> make_codec(std::string_view name, std::size_t block_size = 128);

// The codec's worst-case error over every value a block whose absmax is `block_absmax` can hold
// (error_bound depends on the value, and the worst value is not always the largest: fp4's is 3/4 s).
// Evaluated on a grid of 1,025 values that contains each format's worst case.
double worst_error_in_block(const Codec& codec, double block_absmax);

// The valid names, in the order of CodecKind.
std::vector<std::string> codec_names();

}  // namespace loco::comm
