#include "loco/data/block_decompress.h"

#include <fmt/format.h>
#include <lz4.h>
#include <lz4frame.h>
#include <zlib.h>
#include <zstd.h>

#include <limits>
#include <memory>

#if LOCO_HAVE_SNAPPY
#include <snappy-c.h>
#endif

namespace loco::data {

namespace {

const char* codec_name(BlockCodec codec) {
  switch (codec) {
    case BlockCodec::snappy:
      return "snappy";
    case BlockCodec::gzip:
      return "gzip";
    case BlockCodec::zstd:
      return "zstd";
    case BlockCodec::lz4_block:
    case BlockCodec::lz4_frame:
      return "LZ4";
  }
  return "?";
}

bool inflate_exactly(std::string_view compressed, std::string& out) {
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 32) != Z_OK) throw IoError("zlib could not start a decoder (out of memory?).");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int result = inflate(&stream, Z_FINISH);
  const bool whole = result == Z_STREAM_END && stream.total_out == out.size();
  inflateEnd(&stream);
  return whole;
}

// The frames of `compressed`, one after another, must fill `out` and end where the data ends.
bool lz4_frames_exactly(std::string_view compressed, std::string& out) {
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION))) {
    throw IoError("liblz4 could not start a decoder (out of memory?).");
  }
  const std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)> context(raw,
                                                                                     LZ4F_freeDecompressionContext);
  std::size_t in = 0, produced = 0, hint = 1;
  while (in < compressed.size()) {
    std::size_t in_size = compressed.size() - in, out_size = out.size() - produced;
    hint = LZ4F_decompress(context.get(), out.data() + produced, &out_size, compressed.data() + in, &in_size, nullptr);
    if (LZ4F_isError(hint) || (in_size == 0 && out_size == 0)) return false;  // damaged, or stuck with `out` full
    in += in_size;
    produced += out_size;
  }
  return hint == 0 && produced == out.size();  // the last frame complete
}

}  // namespace

std::string decompress_block(BlockCodec codec, std::string_view compressed, std::uint64_t size, const char* what,
                             const TableFileProblems& problems) {
  std::string out(static_cast<std::size_t>(size), '\0');
  bool whole = false;
  switch (codec) {
    case BlockCodec::zstd: {
      const std::size_t got = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
      whole = !ZSTD_isError(got) && got == out.size();
      break;
    }
    case BlockCodec::gzip:
      whole = inflate_exactly(compressed, out);
      break;
    case BlockCodec::lz4_block:
      whole = compressed.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()) &&
              out.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()) &&
              LZ4_decompress_safe(compressed.data(), out.data(), static_cast<int>(compressed.size()),
                                  static_cast<int>(out.size())) == static_cast<int>(out.size());
      break;
    case BlockCodec::lz4_frame:
      whole = lz4_frames_exactly(compressed, out);
      break;
    case BlockCodec::snappy: {
#if LOCO_HAVE_SNAPPY
      std::size_t length = 0;
      whole = snappy_uncompressed_length(compressed.data(), compressed.size(), &length) == SNAPPY_OK &&
              length == out.size() &&
              snappy_uncompress(compressed.data(), compressed.size(), out.data(), &length) == SNAPPY_OK;
      break;
#else
      throw problems.unsupported(
          fmt::format("{} is compressed with snappy, and this build of loco has no libsnappy", what));
#endif
    }
  }
  if (!whole)
    throw problems.damaged(fmt::format("{} does not decompress to its size with {}", what, codec_name(codec)));
  return out;
}

}  // namespace loco::data
