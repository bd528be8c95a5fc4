// Note "streamed-text" (data/streamed_text.h): text shown as tokens come, whose pieces put together are the
// decoded text, never ending inside a character.
#include "loco/data/streamed_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loco::data {
namespace {

// Byte tokens, shown after each one: a 2-byte, a 3-byte and a 4-byte character are held back until whole.
TEST(StreamedText, HoldsBackACharacterUntilAllItsBytesAreThere) {
  const ByteTokenizer tokenizer;
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x99\x82!";
  const std::vector<std::uint32_t> all = tokenizer.encode(text);
  StreamedText stream(tokenizer);
  std::vector<std::string> pieces;
  for (std::size_t n = 1; n <= all.size(); ++n) {
    pieces.push_back(stream.show(std::vector<std::uint32_t>(all.begin(), all.begin() + n), n == all.size()));
  }
  std::string joined;
  for (const auto& piece : pieces) joined += piece;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(pieces[3], "");            // the é's first byte
  EXPECT_EQ(pieces[4], "\xC3\xA9");    // then the whole é
  EXPECT_EQ(pieces[6] + pieces[7], "");  // the € 's first two bytes
  EXPECT_EQ(pieces[8], "\xE2\x82\xAC");
  EXPECT_EQ(pieces[10] + pieces[11] + pieces[12], "");
  EXPECT_EQ(pieces[13], "\xF0\x9F\x99\x82");
}

// The last show returns what was held back: a generation that ends inside a character ends with U+FFFD for it,
// so that what is shown is UTF-8 (before: its bytes, raw).
TEST(StreamedText, TheLastShowReturnsWhatWasHeldBack) {
  const ByteTokenizer tokenizer;
  StreamedText stream(tokenizer);
  EXPECT_EQ(stream.show({'a', 0xE2, 0x82}, false), "a");
  EXPECT_EQ(stream.show({'a', 0xE2, 0x82}, true), "\xEF\xBF\xBD");
}

// Bytes a byte-level model samples that are no UTF-8 (a stray continuation byte, a lead byte followed by ASCII)
// are shown as U+FFFD, one for each maximal ill-formed part, as soon as nothing can complete them (before: raw,
// and `loco generate`'s output was not UTF-8).
TEST(StreamedText, BytesThatAreNoUtf8AreShownAsReplacementCharacters) {
  const ByteTokenizer tokenizer;
  StreamedText stream(tokenizer);
  EXPECT_EQ(stream.show({'a', 0xBB}, false), "a\xEF\xBF\xBD");
  EXPECT_EQ(stream.show({'a', 0xBB, 0xE4, 0xB8}, false), "");
  EXPECT_EQ(stream.show({'a', 0xBB, 0xE4, 0xB8, 'b'}, false),
            "\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(stream.show({'a', 0xBB, 0xE4, 0xB8, 'b', 0xE4, 0xB8, 0x80}, true), "\xE4\xB8\x80");
}

// A tokenizer whose earlier text changes once more tokens follow: nothing more is shown until the end, which
// starts a new line with the whole text.
class Rewriting final : public Tokenizer {
 public:
  std::vector<std::uint32_t> encode(std::string_view) const override { return {}; }
  std::string decode(const std::vector<std::uint32_t>& ids) const override {
    return ids.size() < 3 ? std::string(ids.size(), 'x') : std::string(ids.size(), 'y');
  }
  std::uint32_t vocab_size() const override { return 10; }
  std::uint32_t bos_id() const override { return 8; }
  std::uint32_t eos_id() const override { return 9; }
  std::string kind() const override { return "test"; }
  std::vector<VocabularyPiece> vocabulary() const override { return {}; }
};

// Sentencepiece decodes the byte pieces of an incomplete character to U+FFFD: held back until it is whole.
class ReplacingIncomplete final : public Tokenizer {
 public:
  std::vector<std::uint32_t> encode(std::string_view) const override { return {}; }
  std::string decode(const std::vector<std::uint32_t>& ids) const override {
    return ids.size() == 1 ? "ab\xEF\xBF\xBD\xEF\xBF\xBD" : "ab\xE2\x82\xAC";
  }
  std::uint32_t vocab_size() const override { return 10; }
  std::uint32_t bos_id() const override { return 8; }
  std::uint32_t eos_id() const override { return 9; }
  std::string kind() const override { return "test"; }
  std::vector<VocabularyPiece> vocabulary() const override { return {}; }
};

TEST(StreamedText, AReplacementCharacterAtTheEndIsHeldBack) {
  const ReplacingIncomplete tokenizer;
  StreamedText stream(tokenizer);
  EXPECT_EQ(stream.show({1}, false), "ab");
  EXPECT_EQ(stream.show({1, 2}, false), "\xE2\x82\xAC");
}

TEST(StreamedText, ATextThatChangesIsShownWholeAgainAtTheEnd) {
  const Rewriting tokenizer;
  StreamedText stream(tokenizer);
  EXPECT_EQ(stream.show({1, 1}, false), "xx");
  EXPECT_EQ(stream.show({1, 1, 1}, false), "");
  EXPECT_EQ(stream.show({1, 1, 1, 1}, true), "\nyyyy");
}

}  // namespace
}  // namespace loco::data
