#include "loco/data/document_split.h"

#include <cmath>

#include "loco/util/portable_random.h"

namespace loco::data {

namespace {

constexpr std::uint64_t kSplitStream = 0x73706c6974;  // "split"

}  // namespace

std::uint64_t document_hash(std::uint64_t key, std::uint32_t file, std::uint64_t line) {
  return mix_seed(mix_seed(key, file), line);
}

DocumentSplit::DocumentSplit(double val_fraction, std::uint64_t seed)
    // val_fraction < 1, so the product is below 2^64 and converts exactly enough (to 2^-53).
    : key_(mix_seed(seed, kSplitStream)),
      threshold_(val_fraction <= 0 ? 0 : static_cast<std::uint64_t>(std::ldexp(val_fraction, 64))) {}

std::uint64_t DocumentSplit::hash(std::uint32_t file, std::uint64_t line) const {
  return document_hash(key_, file, line);
}

}  // namespace loco::data
