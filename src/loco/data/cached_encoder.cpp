#include "loco/data/cached_encoder.h"

#include "loco/data/corpus_stream.h"
#include "loco/data/sentencepiece_tokenizer.h"

namespace loco::data {

namespace {

// Longer "words" (URLs, tables, runs of symbols) are rare and would only fill the cache.
constexpr std::size_t kMaxCachedWordBytes = 48;

// Note "long-words": sentencepiece's BPE takes time and memory that grow faster than a word's length (a 16 MB
// JSONL record without a space, such as Chinese text: 2.3 GB and 35 s). A word longer than a text file's
// longest part (corpus_stream.h) is encoded in pieces of at most that length, cut between characters, as a
// text file is cut into parts: no merge crosses a cut, which costs about one id per piece.
constexpr std::size_t kMaxWordBytes = 4 * kTextPartBytes;

// True when a word starts at text[i]: a space or the three bytes of U+2581 "▁".
bool starts_word(std::string_view text, std::size_t i) {
  return text[i] == ' ' ||
         (text[i] == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x96' && text[i + 2] == '\x81');
}

}  // namespace

bool CachedEncoder::exact_by_words(const Tokenizer& tokenizer) {
  if (tokenizer.kind() != kSentencePieceKind) return false;
  // Piece 0 is <unk>, which decodes as " ⁇ "; BOS and EOS decode to nothing.
  for (std::uint32_t id = 1; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.decode({id}).find(' ', 1) != std::string::npos) return false;
  }
  // A dummy prefix or a normalizer that rewrites spaces shows here.
  const std::string probe = "Two  spaces,\ta tab \xE2\x96\x81 a mark\nand a line  ";
  CachedEncoder by_words(tokenizer, true, 0);
  std::vector<std::uint32_t> ids;
  by_words.encode(probe, ids);
  return ids == tokenizer.encode(probe);
}

CachedEncoder::CachedEncoder(const Tokenizer& tokenizer, bool by_words, std::size_t max_words)
    : tokenizer_(tokenizer), by_words_(by_words), max_words_(max_words) {}

void CachedEncoder::encode(std::string_view text, std::vector<std::uint32_t>& ids) {
  if (!by_words_) {
    tokenizer_.encode_into(text, ids);
    return;
  }
  // BPE gives about one id per 4 bytes of text (3 on code): grown past this by doubling, which a long
  // document seldom needs.
  ids.reserve(ids.size() + text.size() / 3 + 2);
  std::size_t begin = 0;
  for (std::size_t i = 1; i < text.size(); ++i) {
    if (starts_word(text, i)) {
      encode_word(text.substr(begin, i - begin), ids);
      begin = i;
    }
  }
  if (begin < text.size()) encode_word(text.substr(begin), ids);
}

void CachedEncoder::encode_word(std::string_view word, std::vector<std::uint32_t>& ids) {
  while (word.size() > kMaxWordBytes) {
    std::size_t cut = kMaxWordBytes;
    while (cut > kMaxWordBytes - 4 && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80)
      --cut;  // not inside a character
    tokenizer_.encode_into(word.substr(0, cut), ids);
    word.remove_prefix(cut);
  }
  if (word.size() > kMaxCachedWordBytes) {
    std::vector<std::uint32_t> encoded = tokenizer_.encode(word);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    return;
  }
  std::string key(word);
  auto found = words_.find(key);
  if (found == words_.end()) {
    std::vector<std::uint32_t> encoded = tokenizer_.encode(word);
    // A full cache keeps what it has: the frequent words of a corpus arrive early.
    if (words_.size() >= max_words_) {
      ids.insert(ids.end(), encoded.begin(), encoded.end());
      return;
    }
    found = words_.emplace(std::move(key), std::move(encoded)).first;
  }
  ids.insert(ids.end(), found->second.begin(), found->second.end());
}

}  // namespace loco::data
