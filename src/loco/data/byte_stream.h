// Reading a corpus file as a stream of bytes whatever its compression: plain, gzip (.gz, through
// zlib), zstd (.zst, through libzstd), xz (.xz, through liblzma) or bzip2 (.bz2, through libbz2), chosen by
// the file name's last extension. Nothing is held
// but one buffer of each side, so files of any size stream in bounded memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace loco::data {

namespace fs = std::filesystem;

enum class Compression { none, gzip, zstd, xz, bzip2 };

// What loco knows of a compression format: the extension it reads it by, its name, the command that writes a file
// of it decompressed to standard output (for fixes loco suggests), and whether bytes begin as its files do.
struct CompressionFormat {
  Compression kind;
  const char* extension;     // ".gz"
  const char* name;          // "gzip"
  const char* decompressor;  // "zcat"
  bool (*begins_as)(std::string_view start);
};

// The format of `compression`; nullptr for none.
const CompressionFormat* compression_format(Compression compression);

// The format whose files begin as `start` (a file's first bytes) does; nullptr for none.
const CompressionFormat* compression_marked(std::string_view start);

// A file's last extension in lower case, by which loco knows its format: "G.JSONL" is JSON Lines and
// "b.txt.GZ" gzip, as their lower-case names are (before: read as plain text, syntax and all, or refused as
// misnamed).
std::string file_extension(const fs::path& path);

// By the last extension (any case): .gz -> gzip, .zst -> zstd, .xz -> xz, .bz2 -> bzip2, anything else -> none.
Compression compression_of(const fs::path& path);

// The name without a compression extension: "a.jsonl.zst" -> "a.jsonl".
fs::path without_compression_extension(const fs::path& path);

class ByteStream {
 public:
  explicit ByteStream(const fs::path& path);  // IoError naming the path when it cannot be opened
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Up to `capacity` bytes of content into `buffer`; 0 only at the end. DataError naming the file
  // when compressed data is corrupt or ends in the middle of a frame (a truncated download).
  std::size_t read(char* buffer, std::size_t capacity);
  // As read, but on until `least` bytes (or `capacity`, if smaller) are held or the content ends: a decoder
  // returns early at the end of each gzip member or zstd frame, and what a file begins with is looked at whole.
  std::size_t read_at_least(char* buffer, std::size_t capacity, std::size_t least);

  // Bytes of the file itself consumed so far (compressed bytes where compressed), for progress.
  std::uint64_t file_bytes_read() const;

  class Decoder;  // one per compression (byte_stream.cpp)

 private:
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace loco::data
