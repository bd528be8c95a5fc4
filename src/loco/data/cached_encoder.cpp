#include "loco/data/cached_encoder.h"

#include "loco/data/sentencepiece_tokenizer.h"

namespace loco::data {

namespace {

// Bounds the cache (about 100 bytes a word: ~50 MB a thread). When it is full, words not yet in it
// are encoded without being kept; the frequent words of a corpus arrive early, so little is lost.
constexpr std::size_t kMaxCachedWords = std::size_t{1} << 19;
// Longer "words" (URLs, tables, runs of symbols) are rare and would only fill the cache.
constexpr std::size_t kMaxCachedWordBytes = 48;

// True when a word starts at text[i]: a space or the three bytes of U+2581 "▁".
bool starts_word(std::string_view text, std::size_t i) {
  return text[i] == ' ' ||
         (text[i] == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x96' && text[i + 2] == '\x81');
}

}  // namespace

CachedEncoder::CachedEncoder(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), by_words_(tokenizer.kind() == kSentencePieceKind) {}

void CachedEncoder::encode(std::string_view text, std::vector<std::uint32_t>& ids) {
  if (!by_words_) {
    std::vector<std::uint32_t> encoded = tokenizer_.encode(text);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    return;
  }
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
  if (word.size() > kMaxCachedWordBytes) {
    std::vector<std::uint32_t> encoded = tokenizer_.encode(word);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    return;
  }
  std::string key(word);
  auto found = words_.find(key);
  if (found == words_.end()) {
    std::vector<std::uint32_t> encoded = tokenizer_.encode(word);
    if (words_.size() == kMaxCachedWords) {
      ids.insert(ids.end(), encoded.begin(), encoded.end());
      return;
    }
    found = words_.emplace(std::move(key), std::move(encoded)).first;
  }
  ids.insert(ids.end(), found->second.begin(), found->second.end());
}

}  // namespace loco::data
