// The train/validation split of a corpus, by whole documents, so that no validation text is ever
// trained on (and the tokenizer, trained on train documents only, never sees it either).
//
// Decided for each document from its position alone, so that a corpus of any size is split in one
// pass, without holding or shuffling a list of its documents: document (f, l), the l-th line of the
// f-th corpus file (l = 0 for a text file, one document), goes to val when
//   hash(seed, f, l) < val_fraction · 2^64,   hash = SplitMix64 (mix_seed) of seed, then f, then l,
// so each document is in val with probability val_fraction, independently of the others, and the
// same corpus and seed always give the same split. If no document falls in val (a tiny corpus), the
// train document with the smallest hash goes there instead (ValidationFallback), so that val holds at
// least one document whenever val_fraction > 0.
#pragma once

#include <cstdint>
#include <optional>

#include "loco/util/error.h"

namespace loco::data {

// A document's hash under `key` (one key per use: the split, the tokenizer sample).
std::uint64_t document_hash(std::uint64_t key, std::uint32_t file, std::uint64_t line);

class DocumentSplit {
 public:
  DocumentSplit(double val_fraction, std::uint64_t seed);

  std::uint64_t hash(std::uint32_t file, std::uint64_t line) const;
  bool in_validation(std::uint64_t hash) const { return hash < threshold_; }

 private:
  std::uint64_t key_;
  std::uint64_t threshold_;  // val_fraction · 2^64
};

// The tiny-corpus rule, applied to the non-blank documents in corpus order by both passes of
// `loco prepare` (the tokenizer's sample must leave out the document the writer will move to val).
// While no document has fallen in val, the train document of smallest hash so far is the candidate.
class ValidationFallback {
 public:
  explicit ValidationFallback(bool hold_out) : hold_out_(hold_out) {}

  enum class Role {
    validation,  // drawn for val by its hash
    candidate,   // the new candidate: the previous one, if any, is an ordinary train document now
    train,
  };
  Role observe(std::uint64_t hash, bool in_validation);

  // True while the rule may still move a document to val: val_fraction > 0 and no val document yet.
  bool undecided() const { return hold_out_ && !val_seen_; }
  bool holds_out() const { return hold_out_; }
  bool has_candidate() const { return candidate_hash_.has_value(); }
  std::uint64_t documents() const { return documents_; }

 private:
  bool hold_out_;
  bool val_seen_ = false;
  std::optional<std::uint64_t> candidate_hash_;
  std::uint64_t documents_ = 0;
};

// A corpus of one document cannot give val a document and keep one to train on.
DataError single_document_error();

}  // namespace loco::data
