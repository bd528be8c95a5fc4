// Encoding through a cache of words, the main speed-up of `loco prepare`: in prose a few thousand
// words make most of the text, and sentencepiece's BPE spends its time merging the same words again.
//
// Why the ids are exactly tokenizer.encode(text): loco trains sentencepiece with split_by_whitespace
// (its default) and without a dummy prefix, so every piece holds "▁" (the escaped space) only as its
// first character, and a merge that would join the end of one word to the "▁" of the next makes no
// piece. BPE therefore never merges across the position before a space, and encoding the text cut
// before each space (and before each literal "▁", which sentencepiece treats the same) gives the same
// ids word by word. exact_by_words() checks this of a model before it is trusted (a model trained
// elsewhere and brought in with --tokenizer-from may differ): no piece with "▁" past its start, and
// a probe text encoded both ways. A test compares both ways on generated text made to break it
// (runs of spaces, tabs, newlines, "▁", invalid UTF-8); docs/results.md reports a check on all of
// Brown. The byte tokenizer is fast already and encodes without the cache. One exception: a word longer than
// a text file's longest part (a long text without spaces) is encoded in pieces of that length (note
// "long-words", cached_encoder.cpp), which bounds the time and memory sentencepiece takes for it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loco/data/tokenizer.h"

namespace loco::data {

class CachedEncoder {
 public:
  // True when encoding word by word gives tokenizer.encode's ids (see above); false for the byte
  // tokenizer, which gains nothing from a cache. Decodes every piece once: call it once per run.
  static bool exact_by_words(const Tokenizer& tokenizer);

  // `by_words`: exact_by_words(tokenizer); otherwise whole texts go to the tokenizer. The cache keeps
  // at most `max_words` words (about 100 bytes each).
  CachedEncoder(const Tokenizer& tokenizer, bool by_words, std::size_t max_words);

  // Appends the ids of `text` (no BOS/EOS) to `ids`. One encoder per thread: the cache is not shared.
  void encode(std::string_view text, std::vector<std::uint32_t>& ids);

  std::size_t cached_words() const { return words_.size(); }

 private:
  void encode_word(std::string_view word, std::vector<std::uint32_t>& ids);

  const Tokenizer& tokenizer_;
  bool by_words_;
  std::size_t max_words_;
  std::unordered_map<std::string, std::vector<std::uint32_t>> words_;
};

}  // namespace loco::data
