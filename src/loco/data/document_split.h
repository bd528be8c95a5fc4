// The train/validation split of a corpus, by whole documents, so that no validation text is ever
// trained on (and the tokenizer, trained on train documents only, never sees it either).
//
// Decided for each document from its position alone, so that a corpus of any size is split in one
// pass, without holding or shuffling a list of its documents: document (f, l), the l-th line of the
// f-th corpus file (l = 0 for a text file, one document), goes to val when
//   hash(seed, f, l) < val_fraction · 2^64,   hash = SplitMix64 (mix_seed) of seed, then f, then l,
// so each document is in val with probability val_fraction, independently of the others, and the
// same corpus and seed always give the same split. If no document falls in val (a tiny corpus), the
// train document with the smallest hash goes there instead (DatasetWriter does this), so that val
// holds at least one document whenever val_fraction > 0.
#pragma once

#include <cstdint>

namespace loco::data {

// A document's hash under `key` (one key per use: the split, the tokenizer sample).
std::uint64_t document_hash(std::uint64_t key, std::uint32_t file, std::uint64_t line);

class DocumentSplit {
 public:
  DocumentSplit(double val_fraction, std::uint64_t seed);

  std::uint64_t hash(std::uint32_t file, std::uint64_t line) const;
  bool in_validation(std::uint64_t hash) const { return hash < threshold_; }
  bool in_validation(std::uint32_t file, std::uint64_t line) const { return in_validation(hash(file, line)); }

 private:
  std::uint64_t key_;
  std::uint64_t threshold_;  // val_fraction · 2^64
};

}  // namespace loco::data
