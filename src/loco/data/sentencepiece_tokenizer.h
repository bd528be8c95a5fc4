// A trained sentencepiece BPE model behind the Tokenizer interface, and its training.
//
// Training settings (note "sentencepiece-settings", also in docs/data.md): ids unk = 0, BOS = 1,
// EOS = 2, no pad; byte_fallback so that any UTF-8 text encodes without <unk>; the identity
// normalization, remove_extra_whitespaces=false and add_dummy_prefix=false so that
// decode(encode(text)) == text for valid UTF-8. add_dummy_prefix=false matters because documents are
// encoded whole: with a dummy prefix, training lines would start with "▁word" while the first word
// after a newline inside a document is encoded as "word".
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loco/data/sentencepiece_library.h"
#include "loco/data/tokenizer.h"

namespace loco::data {

inline constexpr const char* kSentencePieceKind = "sentencepiece-bpe";

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads DIR/info.model_file and checks that it agrees with `info` (from DIR/tokenizer.json).
  SentencePieceTokenizer(const fs::path& dir, const TokenizerInfo& info);
  ~SentencePieceTokenizer() override;

  std::vector<std::uint32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<std::uint32_t>& ids) const override;
  std::uint32_t vocab_size() const override { return info_.vocab_size; }
  std::uint32_t bos_id() const override { return info_.bos_id; }
  std::uint32_t eos_id() const override { return info_.eos_id; }
  std::string kind() const override { return kSentencePieceKind; }
  std::vector<VocabularyPiece> vocabulary() const override;

 private:
  TokenizerInfo info_;
  std::unique_ptr<spm::Model> model_;  // from the sentencepiece plugin (sentencepiece_library.h)
};

// Stores the next training document in `text`; returns false when there are no more.
using DocumentSource = std::function<bool(std::string& text)>;

// Trains a BPE model of `vocab_size` pieces on the lines of the documents (at most the first
// kMaxTrainingLines lines: pass documents in random order) and writes DIR/tokenizer.model and
// DIR/tokenizer.json. DataError when the corpus cannot support the vocabulary.
TokenizerInfo train_sentencepiece_bpe(const DocumentSource& next_document, std::uint32_t vocab_size,
                                      const fs::path& dir);

inline constexpr std::uint64_t kMaxTrainingLines = 2'000'000;

}  // namespace loco::data
