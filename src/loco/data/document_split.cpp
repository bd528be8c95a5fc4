#include "loco/data/document_split.h"

#include <numeric>

#include "loco/data/shuffle.h"
#include "loco/util/error.h"

namespace loco::data {

DocumentSplit split_documents(const std::vector<std::uint64_t>& text_bytes, double val_fraction, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> order = random_permutation(text_bytes.size(), rng);
  DocumentSplit split;
  if (val_fraction <= 0) {
    split.train = std::move(order);
    return split;
  }
  if (order.size() < 2) {
    throw DataError(
        "the corpus holds a single document, but the validation split needs at least one "
        "document that training never sees. Add documents (each text file and each JSONL line is "
        "one), or pass --val-fraction 0 to prepare without validation data (training then reports "
        "no eval loss).");
  }
  const double total = static_cast<double>(std::accumulate(text_bytes.begin(), text_bytes.end(), std::uint64_t{0}));
  std::uint64_t val_bytes = 0;
  std::size_t taken = 0;
  do {
    val_bytes += text_bytes[order[taken++]];
  } while (static_cast<double>(val_bytes) < val_fraction * total && taken + 1 < order.size());
  split.val.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(taken));
  split.train.assign(order.begin() + static_cast<std::ptrdiff_t>(taken), order.end());
  return split;
}

}  // namespace loco::data
