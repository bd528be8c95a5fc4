#include "loco/data/byte_stream.h"

#include <bzlib.h>
#include <fmt/format.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "loco/util/error.h"

namespace loco::data {

namespace {

constexpr std::size_t kFileChunk = 256 << 10;  // compressed bytes read at a time

DataError corrupt(const fs::path& path, const std::string& what) {
  return DataError(fmt::format("{}: {}. The file is damaged or was cut short (an interrupted download or copy): "
                               "fetch or compress it again, or leave it out of --input.",
                               path.string(), what));
}

// The raw bytes of the file, read in chunks.
class FileReader {
 public:
  explicit FileReader(const fs::path& path) : path_(path), file_(std::fopen(path.c_str(), "rb")) {
    if (file_ == nullptr) {
      throw IoError(fmt::format("cannot open {}: {}. Check the path and its permissions.", path.string(),
                                std::strerror(errno)));
    }
  }
  ~FileReader() { std::fclose(file_); }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  std::size_t read(void* buffer, std::size_t capacity) {
    std::size_t got = std::fread(buffer, 1, capacity, file_);
    if (got < capacity && std::ferror(file_)) {
      throw IoError(fmt::format("cannot read {}: {}.", path_.string(), std::strerror(errno)));
    }
    consumed_ += got;
    return got;
  }
  std::uint64_t consumed() const { return consumed_; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  std::FILE* file_;
  std::uint64_t consumed_ = 0;
};

}  // namespace

class ByteStream::Decoder {
 public:
  // `compression`: the format the file's name says, whose first bytes it must have.
  explicit Decoder(const fs::path& path, Compression compression = Compression::none)
      : file_(path), format_(compression_format(compression)) {}
  virtual ~Decoder() = default;
  virtual std::size_t read(char* buffer, std::size_t capacity) = 0;
  std::uint64_t file_bytes_read() const { return file_.consumed(); }

 protected:
  // Refills `input_` when it is used up; false at the end of the file. A compressed file without a
  // single byte is a failed download, not an empty document: even empty content has a header.
  bool refill() {
    if (input_position_ < input_.size()) return true;
    input_.resize(kFileChunk);
    input_.resize(file_.read(input_.data(), input_.size()));
    input_position_ = 0;
    if (input_.empty() && file_.consumed() == 0) throw corrupt(file_.path(), "the file is empty");
    if (file_.consumed() == input_.size() && !input_.empty()) refuse_another_format();
    return !input_.empty();
  }

  // After a whole member or stream (`unit`): skips the zero bytes that tar and block devices pad a file with
  // (gzip and bzip2 themselves ignore them; they were refused as a damaged download), then says whether input
  // follows. Anything else after it must begin the next one, with `first_byte`.
  bool skip_padding(const char* unit, char first_byte) {
    std::uint64_t zeros = 0;
    for (bool more = refill(); more; more = refill()) {
      const char* at =
          std::find_if(input_.data() + input_position_, input_.data() + input_.size(), [](char c) { return c != 0; });
      zeros += static_cast<std::uint64_t>(at - (input_.data() + input_position_));
      input_position_ = static_cast<std::size_t>(at - input_.data());
      if (input_position_ == input_.size()) continue;
      if (*at == first_byte) return true;  // the next one's first byte: the decoder checks the rest
      throw DataError(
          fmt::format("{}: after a whole {}{} the file holds bytes that are not {} data (from byte {} on): something "
                      "was appended to the compressed text. Cut them off, or compress the text again",
                      file_.path().string(), unit, zeros > 0 ? fmt::format(" and {} zero bytes", zeros) : "",
                      format_->name, file_.consumed() - (input_.size() - input_position_)));
    }
    return false;
  }

  FileReader file_;
  std::vector<char> input_;
  std::size_t input_position_ = 0;

 private:
  // A file named for compression whose first bytes are not the format's: plain text named .gz is said so, not
  // taken for a damaged download.
  void refuse_another_format() const {
    // A file shorter than any mark is left to the decoder, which says it was cut short.
    constexpr std::size_t kLongestMark = 6;
    if (format_ == nullptr || input_.size() < kLongestMark ||
        format_->begins_as(std::string_view(input_.data(), input_.size()))) {
      return;
    }
    throw DataError(fmt::format("{} is named {} but does not hold {} data (it does not begin as {} data does): if "
                                "it is plain text, rename it without {}; otherwise it is damaged: fetch or compress "
                                "it again, or leave it out of --input.",
                                file_.path().string(), format_->extension, format_->name, format_->name,
                                format_->extension));
  }

  const CompressionFormat* format_;
};

namespace {

class PlainDecoder final : public ByteStream::Decoder {
 public:
  using Decoder::Decoder;
  std::size_t read(char* buffer, std::size_t capacity) override { return file_.read(buffer, capacity); }
};

// gzip through zlib's inflate (windowBits 15 + 16: gzip framing); a file may hold several gzip
// members one after another (what `cat a.gz b.gz` and pigz make), each is decoded in turn.
class GzipDecoder final : public ByteStream::Decoder {
 public:
  explicit GzipDecoder(const fs::path& path) : Decoder(path, Compression::gzip) {
    std::memset(&stream_, 0, sizeof(stream_));
    if (inflateInit2(&stream_, 15 + 16) != Z_OK) throw IoError("zlib could not start a gzip decoder (out of memory?).");
  }
  ~GzipDecoder() override { inflateEnd(&stream_); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    capacity = std::min<std::size_t>(capacity, kFileChunk);  // zlib counts in 32-bit uInt
    std::size_t produced = 0;
    while (produced == 0 && capacity > 0) {
      // At the end of the file a member still open may hold output: inflate once more without input.
      const bool more = in_member_ || !after_member_ ? refill() : skip_padding("gzip member", '\x1f');
      if (!more && !in_member_) return 0;
      stream_.next_in = more ? reinterpret_cast<Bytef*>(input_.data() + input_position_) : nullptr;
      stream_.avail_in = more ? static_cast<uInt>(input_.size() - input_position_) : 0;
      stream_.next_out = reinterpret_cast<Bytef*>(buffer);
      stream_.avail_out = static_cast<uInt>(capacity);
      int result = inflate(&stream_, Z_NO_FLUSH);
      if (more) input_position_ = input_.size() - stream_.avail_in;
      produced = capacity - stream_.avail_out;
      if (result == Z_STREAM_END) {
        in_member_ = false;
        after_member_ = true;
        inflateReset(&stream_);
      } else if (result == Z_OK || result == Z_BUF_ERROR) {
        in_member_ = true;
        after_member_ = false;
        if (!more && produced == 0) throw corrupt(file_.path(), "the gzip data ends in the middle of a member");
      } else {
        throw corrupt(file_.path(), fmt::format("not valid gzip data ({})", stream_.msg ? stream_.msg : "zlib error"));
      }
    }
    return produced;
  }

 private:
  z_stream stream_;
  bool in_member_ = false;
  bool after_member_ = false;  // a member ended, and no other has begun
};

// zstd through libzstd's streaming decoder; consecutive frames are decoded in turn.
// The largest window the format allows on 64-bit machines (zstd.h's ZSTD_WINDOWLOG_MAX_64, which it declares for
// static linking only): 2 GiB.
constexpr int kLargestZstdWindowLog = 31;

class ZstdDecoder final : public ByteStream::Decoder {
 public:
  explicit ZstdDecoder(const fs::path& path) : Decoder(path, Compression::zstd), context_(ZSTD_createDStream()) {
    if (context_ == nullptr) throw IoError("libzstd could not start a decoder (out of memory?).");
    // libzstd refuses windows above 128 MiB unless told, and `zstd --long=31` (a large corpus compressed for
    // its long repeats) writes 2 GiB ones: every window the format allows is decoded, its memory allocated
    // as the frame asks for it.
    if (ZSTD_isError(ZSTD_DCtx_setParameter(context_, ZSTD_d_windowLogMax, kLargestZstdWindowLog))) {
      ZSTD_freeDStream(context_);
      throw IoError("libzstd refused a window limit of 2 GiB: this libzstd is not a 64-bit build of 1.4 or later.");
    }
  }
  ~ZstdDecoder() override { ZSTD_freeDStream(context_); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    ZSTD_outBuffer out{buffer, capacity, 0};
    while (out.pos == 0 && capacity > 0) {
      // At the end of the file a frame still open may hold output: decode once more without input.
      const bool more = refill();
      if (!more && !in_frame_) return 0;
      ZSTD_inBuffer in{input_.data(), more ? input_.size() : 0, more ? input_position_ : 0};
      std::size_t hint = ZSTD_decompressStream(context_, &out, &in);
      if (ZSTD_getErrorCode(hint) == ZSTD_error_memory_allocation) {
        throw DataError(
            fmt::format("{}: decoding this zstd data needs more memory than the process may have (its "
                        "window: up to 2 GiB for `zstd --long=31`); free memory or raise the limit "
                        "(ulimit -v), or recompress it without --long",
                        file_.path().string()));
      }
      if (ZSTD_isError(hint)) {
        throw corrupt(file_.path(), fmt::format("not valid zstd data ({})", ZSTD_getErrorName(hint)));
      }
      if (more) input_position_ = in.pos;
      in_frame_ = hint != 0;  // 0: a frame was completed and all of it was flushed
      if (!more && out.pos == 0) throw corrupt(file_.path(), "the zstd data ends in the middle of a frame");
    }
    return out.pos;
  }

 private:
  ZSTD_DStream* context_;
  bool in_frame_ = false;
};

// xz through liblzma's stream decoder; LZMA_CONCATENATED decodes several streams one after another (what
// `cat a.xz b.xz` and parallel compressors make).
class XzDecoder final : public ByteStream::Decoder {
 public:
  explicit XzDecoder(const fs::path& path) : Decoder(path, Compression::xz) {
    if (lzma_stream_decoder(&stream_, kXzMemoryLimit, LZMA_CONCATENATED) != LZMA_OK) {
      throw IoError("liblzma could not start an xz decoder (out of memory?).");
    }
  }
  ~XzDecoder() override { lzma_end(&stream_); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    std::size_t produced = 0;
    while (produced == 0 && capacity > 0 && !finished_) {
      // At the end of the file the decoder is told so (LZMA_FINISH): it flushes what it holds, or says the
      // data was cut short.
      const bool more = refill();
      stream_.next_in = more ? reinterpret_cast<const std::uint8_t*>(input_.data() + input_position_) : nullptr;
      stream_.avail_in = more ? input_.size() - input_position_ : 0;
      stream_.next_out = reinterpret_cast<std::uint8_t*>(buffer);
      stream_.avail_out = capacity;
      const lzma_ret result = lzma_code(&stream_, more ? LZMA_RUN : LZMA_FINISH);
      if (more) input_position_ = input_.size() - stream_.avail_in;
      produced = capacity - stream_.avail_out;
      if (result == LZMA_STREAM_END) {
        finished_ = true;
      } else if (result == LZMA_MEMLIMIT_ERROR) {
        throw DataError(fmt::format("{}: decoding this xz data needs more than {} MiB of memory (its dictionary), "
                                    "more than loco allows; recompress it with a smaller preset (xz -6) or as .zst.",
                                    file_.path().string(), kXzMemoryLimit >> 20));
      } else if (result == LZMA_BUF_ERROR && !more) {
        throw corrupt(file_.path(), "the xz data ends in the middle of a stream");
      } else if (result != LZMA_OK && result != LZMA_BUF_ERROR) {
        throw corrupt(file_.path(), fmt::format("not valid xz data (liblzma error {})", static_cast<int>(result)));
      }
    }
    return produced;
  }

 private:
  // xz -9 needs 65 MiB; the format allows dictionaries of 1.5 GiB, which a stranger's file could ask for.
  static constexpr std::uint64_t kXzMemoryLimit = std::uint64_t{512} << 20;
  lzma_stream stream_ = LZMA_STREAM_INIT;
  bool finished_ = false;
};

// bzip2 through libbz2; a file may hold several streams one after another (what pbzip2 makes), each is
// decoded in turn.
class Bzip2Decoder final : public ByteStream::Decoder {
 public:
  explicit Bzip2Decoder(const fs::path& path) : Decoder(path, Compression::bzip2) { start(); }
  ~Bzip2Decoder() override { BZ2_bzDecompressEnd(&stream_); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    capacity = std::min<std::size_t>(capacity, kFileChunk);  // libbz2 counts in 32-bit unsigned int
    std::size_t produced = 0;
    while (produced == 0 && capacity > 0) {
      const bool more = in_stream_ || !after_stream_ ? refill() : skip_padding("bzip2 stream", 'B');
      if (!more && !in_stream_) return 0;
      stream_.next_in = more ? input_.data() + input_position_ : nullptr;
      stream_.avail_in = more ? static_cast<unsigned int>(input_.size() - input_position_) : 0;
      stream_.next_out = buffer;
      stream_.avail_out = static_cast<unsigned int>(capacity);
      const int result = BZ2_bzDecompress(&stream_);
      if (more) input_position_ = input_.size() - stream_.avail_in;
      produced = capacity - stream_.avail_out;
      if (result == BZ_STREAM_END) {
        BZ2_bzDecompressEnd(&stream_);
        start();
        in_stream_ = false;
        after_stream_ = true;
      } else if (result == BZ_OK) {
        in_stream_ = true;
        after_stream_ = false;
        if (!more && produced == 0) throw corrupt(file_.path(), "the bzip2 data ends in the middle of a stream");
      } else {
        throw corrupt(file_.path(), fmt::format("not valid bzip2 data (libbz2 error {})", result));
      }
    }
    return produced;
  }

 private:
  void start() {
    std::memset(&stream_, 0, sizeof(stream_));
    if (BZ2_bzDecompressInit(&stream_, 0, 0) != BZ_OK) throw IoError("libbz2 could not start a decoder (out of memory?).");
  }

  bz_stream stream_;
  bool in_stream_ = false;
  bool after_stream_ = false;  // a stream ended, and no other has begun
};

}  // namespace

namespace {

// The first bytes of each format's files.
bool begins_with(std::string_view start, std::string_view mark) { return start.substr(0, mark.size()) == mark; }
bool begins_as_gzip(std::string_view start) { return begins_with(start, "\x1F\x8B"); }
bool begins_as_zstd(std::string_view start) {
  // A zstd frame, or a skippable frame (magic 0x184D2A5?, little-endian) as pzstd writes first.
  const bool skippable = !start.empty() && (static_cast<unsigned char>(start[0]) & 0xF0) == 0x50 &&
                         begins_with(start.substr(1), "\x2A\x4D\x18");
  return skippable || begins_with(start, "\x28\xB5\x2F\xFD");
}
bool begins_as_xz(std::string_view start) { return begins_with(start, std::string_view("\xFD" "7zXZ\0", 6)); }
bool begins_as_bzip2(std::string_view start) { return begins_with(start, "BZh"); }

constexpr std::array<CompressionFormat, 4> kCompressionFormats{{
    {Compression::gzip, ".gz", "gzip", "zcat", &begins_as_gzip},
    {Compression::zstd, ".zst", "zstd", "zstdcat", &begins_as_zstd},
    {Compression::xz, ".xz", "xz", "xzcat", &begins_as_xz},
    {Compression::bzip2, ".bz2", "bzip2", "bzcat", &begins_as_bzip2},
}};

}  // namespace

const CompressionFormat* compression_format(Compression compression) {
  for (const CompressionFormat& format : kCompressionFormats) {
    if (format.kind == compression) return &format;
  }
  return nullptr;
}

const CompressionFormat* compression_marked(std::string_view start) {
  for (const CompressionFormat& format : kCompressionFormats) {
    if (format.begins_as(start)) return &format;
  }
  return nullptr;
}

std::string file_extension(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

Compression compression_of(const fs::path& path) {
  const std::string extension = file_extension(path);
  for (const CompressionFormat& format : kCompressionFormats) {
    if (extension == format.extension) return format.kind;
  }
  return Compression::none;
}

fs::path without_compression_extension(const fs::path& path) {
  return compression_of(path) == Compression::none ? path : fs::path(path).replace_extension();
}

ByteStream::ByteStream(const fs::path& path) {
  switch (compression_of(path)) {
    case Compression::gzip:
      decoder_ = std::make_unique<GzipDecoder>(path);
      break;
    case Compression::zstd:
      decoder_ = std::make_unique<ZstdDecoder>(path);
      break;
    case Compression::xz:
      decoder_ = std::make_unique<XzDecoder>(path);
      break;
    case Compression::bzip2:
      decoder_ = std::make_unique<Bzip2Decoder>(path);
      break;
    case Compression::none:
      decoder_ = std::make_unique<PlainDecoder>(path);
      break;
  }
}

ByteStream::~ByteStream() = default;

std::size_t ByteStream::read(char* buffer, std::size_t capacity) { return decoder_->read(buffer, capacity); }

std::size_t ByteStream::read_at_least(char* buffer, std::size_t capacity, std::size_t least) {
  std::size_t held = 0;
  while (held < std::min(least, capacity)) {
    const std::size_t got = read(buffer + held, capacity - held);
    if (got == 0) break;
    held += got;
  }
  return held;
}

std::uint64_t ByteStream::file_bytes_read() const { return decoder_->file_bytes_read(); }

}  // namespace loco::data
