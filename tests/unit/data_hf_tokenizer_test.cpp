// The Hugging Face tokenizer files (data/hf_tokenizer.h): the merge order derived from a sentencepiece
// vocabulary, worked by hand, and the byte tokenizer's files. tests/cli/hf_tokenizer_reference_test.cpp reads
// whole exports with Hugging Face's tokenizers.js.
#include <gtest/gtest.h>

#include "loco/data/hf_tokenizer.h"

namespace loco::data {
namespace {

using Type = VocabularyPiece::Type;
using Merges = std::vector<std::pair<std::string, std::string>>;

// "▁the" splits as "▁t" + "he" only ("▁" + "the" and "▁th" + "e" are not pieces); its score is the lowest of
// the joined pieces, so its merge comes last, after "▁" + "t" (score -1) and "h" + "e" (score -2). Special,
// byte and single-character pieces are never the result of a merge, and a byte piece is never part of one.
TEST(HfTokenizer, MergesAreEverySplitIntoTwoPiecesBestJoinedScoreFirst) {
  const std::vector<VocabularyPiece> pieces{{"<unk>", 0, Type::unknown},
                                            {"<s>", 0, Type::control},
                                            {"</s>", 0, Type::control},
                                            {"\xE2\x96\x81the", -3, Type::normal},
                                            {"he", -2, Type::normal},
                                            {"\xE2\x96\x81t", -1, Type::normal},
                                            {"\xE2\x96\x81", -4, Type::normal},
                                            {"t", -5, Type::normal},
                                            {"h", -6, Type::normal},
                                            {"e", -7, Type::normal},
                                            {"<0x65>", 0, Type::byte},
                                            {"<0x65>e", -8, Type::normal}};
  EXPECT_EQ(bpe_merges(pieces), (Merges{{"\xE2\x96\x81", "t"}, {"h", "e"}, {"\xE2\x96\x81t", "he"}}));
}

// A piece is cut between characters only: "é" + "a" from "éa", never a byte of "é".
TEST(HfTokenizer, MergesCutBetweenCharacters) {
  const std::vector<VocabularyPiece> pieces{{"\xC3\xA9", -2, Type::normal},
                                            {"a", -3, Type::normal},
                                            {"\xC3", -4, Type::normal},
                                            {"\xA9"
                                             "a",
                                             -5, Type::normal},
                                            {"\xC3\xA9"
                                             "a",
                                             -1, Type::normal}};
  EXPECT_EQ(bpe_merges(pieces), (Merges{{"\xC3\xA9", "a"}}));
}

// Every byte falls back to its piece, id = byte; BOS (256) comes first; no normalizer, no unknown token.
TEST(HfTokenizer, TheByteTokenizerIsTheBytePiecesWithoutMerges) {
  const HfTokenizerFiles files = hf_tokenizer_files(ByteTokenizer(), 128);
  const auto& model = files.tokenizer.at("model");
  EXPECT_EQ(model.at("type"), "BPE");
  EXPECT_TRUE(model.at("byte_fallback").get<bool>());
  EXPECT_TRUE(model.at("unk_token").is_null());
  EXPECT_TRUE(model.at("merges").empty());
  EXPECT_EQ(model.at("vocab").size(), 258u);
  EXPECT_EQ(model.at("vocab").at("<0x41>"), 65);
  EXPECT_EQ(model.at("vocab").at("<0xFF>"), 255);
  EXPECT_EQ(model.at("vocab").at("</s>"), 257);
  EXPECT_TRUE(files.tokenizer.at("normalizer").is_null());
  const auto& template_ = files.tokenizer.at("post_processor");
  EXPECT_EQ(template_.at("single").at(0).at("SpecialToken").at("id"), "<s>");
  EXPECT_EQ(template_.at("special_tokens").at("<s>").at("ids"), nlohmann::json({256}));
  EXPECT_EQ(files.tokenizer.at("added_tokens").size(), 2u);
  EXPECT_EQ(files.tokenizer_config.at("eos_token"), "</s>");
  EXPECT_EQ(files.tokenizer_config.at("model_max_length"), 128);
  EXPECT_FALSE(files.tokenizer_config.at("clean_up_tokenization_spaces").get<bool>());
  EXPECT_FALSE(files.special_tokens_map.contains("unk_token"));
}

}  // namespace
}  // namespace loco::data
