// Compressed inputs for the data-layer tests (gzip, xz, bzip2 as their reference libraries write them;
// zstd: data_test_helpers.h), text that spans several of the decoders' buffers, and a ByteStream read whole.
#pragma once

#include <bzlib.h>
#include <gtest/gtest.h>
#include <lzma.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "loco/data/byte_stream.h"

namespace loco::test {

// Text that compresses poorly enough to span several buffers of the decoders.
inline std::string varied_text(std::size_t bytes, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < bytes) text += "word" + std::to_string(rng() % 100000) + ((rng() % 9) ? " " : "\n");
  return text;
}

// One gzip member of `bytes` (zlib's deflate with gzip framing).
inline std::string gzip(const std::string& bytes) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// One xz stream of `bytes` (liblzma, preset 1).
inline std::string xz(const std::string& bytes) {
  std::string out(lzma_stream_buffer_bound(bytes.size()), '\0');
  std::size_t written = 0;
  EXPECT_EQ(lzma_easy_buffer_encode(1, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                    bytes.size(), reinterpret_cast<std::uint8_t*>(out.data()), &written, out.size()),
            LZMA_OK);
  out.resize(written);
  return out;
}

// One bzip2 stream of `bytes` (libbz2, 100 KB blocks).
inline std::string bzip2(const std::string& bytes) {
  std::string out(bytes.size() + bytes.size() / 100 + 600, '\0');
  auto written = static_cast<unsigned int>(out.size());
  EXPECT_EQ(BZ2_bzBuffToBuffCompress(out.data(), &written, const_cast<char*>(bytes.data()),
                                     static_cast<unsigned int>(bytes.size()), 1, 0, 0),
            BZ_OK);
  out.resize(written);
  return out;
}

inline std::string read_all(data::ByteStream& stream) {
  std::string content;
  std::vector<char> buffer(1 << 16);
  while (const std::size_t got = stream.read(buffer.data(), buffer.size())) content.append(buffer.data(), got);
  return content;
}

}  // namespace loco::test
