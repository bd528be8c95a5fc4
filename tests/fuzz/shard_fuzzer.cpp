// Fuzz target: a token shard file (data/shard.h) as training maps it: the header (magic, version, bytes per
// token, count) checked against the file's size, then tokens read from both ends as the sampler would.
#include <algorithm>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "loco/data/shard.h"
#include "loco/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using loco::fuzz::fuzz_require;
  const auto path = loco::fuzz::write_scratch_file("fuzz.bin", loco::fuzz::as_text(data, size));
  try {
    const loco::data::ShardReader shard(path);
    fuzz_require(loco::data::kShardHeaderBytes + shard.count() * shard.bytes_per_token() == size,
                 "an accepted shard is as long as its header says");
    const std::uint64_t n = std::min<std::uint64_t>(shard.count(), 16);
    std::vector<std::int64_t> tokens(n);
    shard.copy(0, n, tokens.data());
    shard.copy(shard.count() - n, n, tokens.data());
    for (std::int64_t token : tokens) {
      fuzz_require(token >= 0 && token < (std::int64_t{1} << (8 * shard.bytes_per_token())),
                   "a token fits its width");
    }
  } catch (const loco::DataError&) {
  }
  return 0;
}
