// The train/validation split of a corpus, by whole documents, so that no validation text is ever
// trained on (and the tokenizer, trained on the train split only, never sees it either).
#pragma once

#include <cstdint>
#include <vector>

namespace loco::data {

struct DocumentSplit {
  std::vector<std::uint64_t> train;  // document indices, in shuffled order
  std::vector<std::uint64_t> val;
};

// Shuffles the documents (Fisher–Yates over std::mt19937_64(seed), see shuffle.h), then moves them
// from the front of that order to val until val holds at least `val_fraction` of the text bytes: at
// least one document when val_fraction > 0, never all of them. The split is decided on bytes
// because tokens are not known before the tokenizer is trained on the train split; both are
// proportional. DataError when val_fraction > 0 and there are fewer than two documents.
DocumentSplit split_documents(const std::vector<std::uint64_t>& text_bytes, double val_fraction, std::uint64_t seed);

}  // namespace loco::data
