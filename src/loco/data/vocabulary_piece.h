// One entry of a tokenizer's vocabulary, described as sentencepiece describes its pieces. What a Hugging Face
// tokenizer file (data/hf_tokenizer.h) is written from.
#pragma once

#include <string>

namespace loco::data {

struct VocabularyPiece {
  enum class Type { normal, unknown, control, byte, unused };
  std::string text;  // a space is "▁" (U+2581), a byte piece "<0x41>" (two upper-case hex digits)
  float score = 0;   // BPE joins first the adjacent pair whose joined piece scores highest
  Type type = Type::normal;
};

}  // namespace loco::data
