#include "loco/data/document_split.h"

#include <fmt/format.h>

#include <cmath>

#include "loco/data/corpus_stream.h"
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

ValidationFallback::Role ValidationFallback::observe(std::uint64_t hash, bool in_validation) {
  ++documents_;
  if (in_validation) {
    val_seen_ = true;
    candidate_hash_.reset();
    return Role::validation;
  }
  if (undecided() && (!candidate_hash_ || hash < *candidate_hash_)) {
    candidate_hash_ = hash;
    return Role::candidate;
  }
  return Role::train;
}

DataError single_document_error() {
  return DataError(fmt::format(
      "the corpus holds a single document, but the validation split needs at least one document that training "
      "never sees. Add documents (each JSON line, array element or pretty-printed object is one, and each text file, "
      "one longer than {} KiB one per part of "
      "about that size), or pass --val-fraction 0 to prepare without validation data (training then reports no "
      "eval loss).",
      kTextPartBytes >> 10));
}

}  // namespace loco::data
