#include "loco/data/token_dataset.h"

#include <fmt/format.h>

#include <algorithm>

#include "loco/data/dataset_meta.h"
#include "loco/util/error.h"

namespace loco::data {

TokenDataset TokenDataset::open(const fs::path& data_dir, const std::string& split) {
  DatasetMeta meta = read_dataset_meta(data_dir);
  const SplitMeta& split_meta = meta.split(split);
  auto broken = [&](const std::string& problem) {
    return DataError(
        fmt::format("the {} split of {} {}. The directory is damaged or was changed by hand: run `loco "
                    "prepare` again into a new --out directory.",
                    split, data_dir.string(), problem));
  };

  TokenDataset dataset;
  dataset.name_ = fmt::format("{} ({})", data_dir.string(), split);
  dataset.vocab_size_ = meta.vocab_size;
  for (const auto& name : split_meta.shards) {
    if (name.find('/') != std::string::npos) throw broken(fmt::format("names a shard '{}' outside it", name));
    fs::path path = data_dir / name;
    if (!fs::is_regular_file(path)) {
      throw broken(fs::exists(path) ? fmt::format("has {}, which is not a regular file (a directory, FIFO or device)",
                                                  path.string())
                                    : fmt::format("lacks its shard {}", path.string()));
    }
    ShardReader shard(path);
    if (shard.bytes_per_token() != meta.bytes_per_token) {
      throw broken(fmt::format("has shard {} with {} bytes per token where meta.json says {}", path.string(),
                               shard.bytes_per_token(), meta.bytes_per_token));
    }
    dataset.shard_begin_.push_back(dataset.size_);
    dataset.size_ += shard.count();
    dataset.shards_.push_back(std::move(shard));
  }
  if (dataset.size_ != split_meta.tokens) {
    throw broken(
        fmt::format("holds {} tokens in its shards where meta.json says {}", dataset.size_, split_meta.tokens));
  }
  return dataset;
}

void TokenDataset::copy_tokens(std::uint64_t begin, std::uint64_t count, std::int64_t* out) const {
  LOCO_CHECK(begin <= size_ && count <= size_ - begin, "tokens [{}, {}) outside {} of {} tokens", begin, begin + count,
             name_, size_);
  // The last shard that starts at or before `begin`.
  std::size_t shard = std::upper_bound(shard_begin_.begin(), shard_begin_.end(), begin) - shard_begin_.begin() - 1;
  for (std::uint64_t done = 0; done < count; ++shard) {
    std::uint64_t offset = begin + done - shard_begin_[shard];
    std::uint64_t n = std::min(count - done, shards_[shard].count() - offset);
    shards_[shard].copy(offset, n, out + done);
    done += n;
  }
  for (std::uint64_t i = 0; i < count; ++i) {
    if (out[i] < 0 || out[i] >= vocab_size_) {
      throw DataError(
          fmt::format("token {} of {} is {}, outside the vocabulary of {}: the shards are "
                      "corrupted. Run `loco prepare` again into a new --out directory.",
                      begin + i, name_, out[i], vocab_size_));
    }
  }
}

}  // namespace loco::data
