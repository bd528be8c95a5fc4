// Note "streamed-text": generated text shown as it is made. A token does not always decode to the same text
// alone as in its context (a sentencepiece piece's leading space at the start, a character whose UTF-8 bytes
// are byte tokens of their own), so every show decodes all the tokens so far and returns what is new, holding
// back a last character whose bytes are not all there yet (an incomplete UTF-8 sequence, or the replacement
// character U+FFFD a tokenizer gives for one). The pieces returned, put together, are the decoded text with each
// ill-formed UTF-8 sequence as U+FFFD (a byte tokenizer decodes whatever bytes a model samples), so that what is
// shown is always UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loco/data/tokenizer.h"

namespace loco::data {

class StreamedText {
 public:
  explicit StreamedText(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text of `ids` not returned before; with `last`, all of it, the held-back end included. Should a
  // tokenizer decode an earlier part differently once more tokens follow, nothing more is returned until
  // `last`, which then returns a line break and the whole text again (what was shown is not taken back).
  std::string show(const std::vector<std::uint32_t>& ids, bool last);

 private:
  const Tokenizer& tokenizer_;
  std::string shown_;
};

}  // namespace loco::data
