// One split ("train" or "val") of a prepared data directory: the tokens of all its shards,
// memory-mapped and addressed as one array.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loco/data/shard.h"

namespace loco::data {

namespace fs = std::filesystem;

class TokenDataset {
 public:
  // DataError with the fix if the directory, meta.json or a shard is missing or corrupt.
  static TokenDataset open(const fs::path& data_dir, const std::string& split);

  std::uint64_t size() const { return size_; }              // number of tokens
  std::uint32_t vocab_size() const { return vocab_size_; }  // from meta.json
  const std::string& name() const { return name_; }         // "DIR (train)", for messages

  // Tokens [begin, begin + count) as int64; the range may span shards. DataError if a token is
  // outside the vocabulary (a corrupted shard would otherwise crash the embedding lookup).
  void copy_tokens(std::uint64_t begin, std::uint64_t count, std::int64_t* out) const;

 private:
  TokenDataset() = default;

  std::string name_;
  std::uint32_t vocab_size_ = 0;
  std::uint64_t size_ = 0;
  std::vector<ShardReader> shards_;
  std::vector<std::uint64_t> shard_begin_;  // index of each shard's first token in the split
};

}  // namespace loco::data
