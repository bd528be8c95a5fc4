// Token shard files: what `loco prepare` writes and training memory-maps.
//
// Format (little-endian; also read by bench/ Python code, keep in step with docs/data.md):
//   bytes  0..7   magic "LOCOTOK1"
//   bytes  8..11  u32 version = 1
//   bytes 12..15  u32 bytes_per_token: 2 (uint16 tokens, vocab <= 65536) or 4 (uint32)
//   bytes 16..23  u64 token count
//   bytes 24..31  u64 reserved = 0
//   then count tokens of bytes_per_token bytes each; the file size is exactly 32 + count * bpt.
// A split is stored as shards <split>_000.bin, <split>_001.bin, ... of at most kTokensPerShard.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loco/util/fs.h"

namespace loco::data {

namespace fs = std::filesystem;

inline constexpr std::size_t kShardHeaderBytes = 32;
inline constexpr std::uint32_t kShardVersion = 1;
// 2^28 tokens: 512 MiB uint16 shards, small enough to copy around, few enough to map.
inline constexpr std::uint64_t kTokensPerShard = std::uint64_t{1} << 28;

// 2 when every id fits in uint16, else 4.
std::uint32_t bytes_per_token_for(std::uint32_t vocab_size);

// "train", 3 -> "train_003.bin".
std::string shard_file_name(const std::string& split, std::size_t index);

// Writes one shard to a temporary name; finish() writes the header, syncs and renames it into
// place, so a shard under its final name is always complete.
class ShardWriter {
 public:
  ShardWriter(fs::path path, std::uint32_t bytes_per_token);
  ~ShardWriter();  // removes the temporary file unless finish() ran
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void append(const std::uint32_t* tokens, std::size_t count);
  void finish();
  std::uint64_t count() const { return count_; }
  // CRC-32 of the whole file as 8 hex digits (util/fs.h crc32_hex), computed while writing; after finish().
  const std::string& checksum() const { return checksum_; }

 private:
  void write(const void* bytes, std::size_t size);

  fs::path path_;
  fs::path temporary_;
  std::uint32_t bytes_per_token_;
  std::uint64_t count_ = 0;
  std::FILE* file_ = nullptr;
  std::vector<unsigned char> buffer_;
  unsigned long tokens_crc_;  // CRC-32 of the token bytes so far (zlib's uLong)
  std::string checksum_;
};

// A memory-mapped shard whose header and size were checked on open (tokens are not scanned).
class ShardReader {
 public:
  explicit ShardReader(const fs::path& path);  // DataError naming the file when it is unusable

  std::uint64_t count() const { return count_; }
  std::uint32_t bytes_per_token() const { return bytes_per_token_; }
  const fs::path& path() const { return file_.path(); }

  // Tokens [begin, begin + count) widened to int64 (the dtype of token tensors).
  void copy(std::uint64_t begin, std::uint64_t count, std::int64_t* out) const;

 private:
  MappedFile file_;
  std::uint32_t bytes_per_token_ = 0;
  std::uint64_t count_ = 0;
};

// Writes the tokens of one split as numbered shards of at most `tokens_per_shard` tokens.
class SplitWriter {
 public:
  SplitWriter(fs::path dir, std::string split, std::uint32_t bytes_per_token, std::uint64_t tokens_per_shard);

  void append(const std::vector<std::uint32_t>& tokens);
  // Finishes the last shard and returns the file names in order: at least one (possibly empty)
  // shard, so that every split has a file to open.
  std::vector<std::string> finish();

  // File name -> CRC-32 of each finished shard, computed while writing (no shard is read back).
  const std::map<std::string, std::string>& checksums() const { return checksums_; }

 private:
  void start_shard();
  void finish_shard();

  fs::path dir_;
  std::string split_;
  std::uint32_t bytes_per_token_;
  std::uint64_t tokens_per_shard_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> checksums_;
  std::unique_ptr<ShardWriter> shard_;
};

}  // namespace loco::data
