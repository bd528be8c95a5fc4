// A seeded random sample of a corpus's train documents, at most a budget of text bytes, for training
// the tokenizer: BPE merges are decided by the most frequent pairs, which a sample of tens of
// megabytes already fixes, while training on a whole corpus would hold all of it in memory.
//
// Each document gets a priority, a keyed hash of its position (document_split.h); the sample is the
// documents of lowest priority whose text fits the budget (a "bottom-k" sample by bytes): documents
// are taken in a random order, each equally likely to come first, until the budget is full, and the
// same corpus and seed give the same sample. Once a
// document has been dropped for lack of room, no document of higher priority is taken any more
// (`cutoff`), which keeps the sample a prefix of the priority order and lets the reader skip the
// JSON of most lines (`wants`). A document gives at most an eighth of the budget (its first lines),
// so that a few huge text files (one document each) cannot fill or empty the sample: a document
// larger than the budget would otherwise push out everything, itself included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loco::data {

class TokenizerSample {
 public:
  TokenizerSample(std::uint64_t budget_bytes, std::uint64_t seed);

  std::uint64_t priority(std::uint32_t file, std::uint64_t line) const;

  // False when a document of this priority can no longer enter the sample.
  bool wants(std::uint64_t priority) const { return priority < cutoff_; }

  void offer(std::uint64_t priority, std::string text);

  // Drops the document of this priority, if it is in the sample (the one a tiny corpus moves to val).
  void remove(std::uint64_t priority);

  std::uint64_t bytes() const { return bytes_; }
  std::size_t size() const { return documents_.size(); }

  // The sampled texts in priority order (a random order); empties the sample.
  std::vector<std::string> take_texts();

  static constexpr std::uint64_t kMaxShare = 8;  // a document gives at most budget / kMaxShare bytes

 private:
  struct Entry {
    std::uint64_t priority;
    std::string text;
    bool operator<(const Entry& other) const { return priority < other.priority; }
  };

  std::uint64_t budget_;
  std::uint64_t key_;
  std::uint64_t cutoff_ = UINT64_MAX;
  std::uint64_t bytes_ = 0;
  std::vector<Entry> documents_;  // a max-heap by priority: the front is the first to go
};

}  // namespace loco::data
