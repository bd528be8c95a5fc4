// Tokenizers: byte round trip, sentencepiece BPE training + round trip, tokenizer files.
#include <gtest/gtest.h>

#include <memory>

#include "loco/data/cached_encoder.h"
#include "loco/data/sentencepiece_tokenizer.h"
#include "loco/data/tokenizer.h"
#include "loco/util/error.h"
#include "support/test_support.h"
#include "unit/data_test_helpers.h"

namespace loco::data {
namespace {

using test::ScratchDir;

TEST(DataByteTokenizer, RoundTripsEveryByte) {
  ByteTokenizer tokenizer;
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  std::vector<std::uint32_t> ids = tokenizer.encode(text);
  ASSERT_EQ(ids.size(), 256u);
  EXPECT_EQ(ids[0], 0u);
  EXPECT_EQ(ids[255], 255u);
  EXPECT_EQ(tokenizer.decode(ids), text);
  EXPECT_EQ(tokenizer.vocab_size(), 258u);
  EXPECT_EQ(tokenizer.kind(), "byte");
}

// A document's ids grow once, with room for its EOS: grown by doubling, and copied from a second vector, the
// ids of a 200 MB document held 1.6 GB at once.
TEST(DataByteTokenizer, EncodeIntoGrowsTheIdsOnceWithRoomForTheEos) {
  ByteTokenizer tokenizer;
  const std::string text(100000, 'x');
  std::vector<std::uint32_t> ids{ByteTokenizer::kBos};
  tokenizer.encode_into(text, ids);
  ASSERT_EQ(ids.size(), text.size() + 1);
  EXPECT_EQ(ids[1], static_cast<std::uint32_t>('x'));
  const std::uint32_t* before = ids.data();
  ids.push_back(ByteTokenizer::kEos);
  EXPECT_EQ(ids.data(), before) << "the EOS reallocated the ids";
  EXPECT_LE(ids.capacity(), text.size() + 2);
}

TEST(DataByteTokenizer, DecodeSkipsBosAndEos) {
  ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.decode({tokenizer.bos_id(), 'h', 'i', tokenizer.eos_id()}), "hi");
  EXPECT_EQ(tokenizer.bos_id(), 256u);
  EXPECT_EQ(tokenizer.eos_id(), 257u);
}

TEST(DataTokenizerFiles, ByteTokenizerLoadsFromItsFiles) {
  ScratchDir dir;
  write_tokenizer_info(dir.path(), ByteTokenizer::info());
  auto tokenizer = load_tokenizer(dir.path());
  EXPECT_EQ(tokenizer->kind(), "byte");
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("abc")), "abc");
  EXPECT_EQ(tokenizer_file_names(dir.path()), std::vector<std::string>{"tokenizer.json"});
}

TEST(DataTokenizerFiles, MissingTokenizerIsADataError) {
  ScratchDir dir;
  try {
    load_tokenizer(dir / "nowhere");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json does not exist"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("loco prepare"), std::string::npos) << e.what();
  }
}

TEST(DataTokenizerFiles, ModelFileMustNotBeAPath) {
  ScratchDir dir;
  test::write_text(dir / "tokenizer.json",
                   R"({"kind":"sentencepiece-bpe","vocab_size":300,"bos_id":1,"eos_id":2,"model_file":"../x"})");
  EXPECT_THROW(load_tokenizer(dir.path()), DataError);
}

// Numbers a uint32 cannot hold are refused, not wrapped (10^12 was read as 3567587328, -1 as 4294967295).
TEST(DataTokenizerFiles, IdsAndSizesBeyondTheirRangeAreRefused) {
  ScratchDir dir;
  for (const std::string fields : {R"("vocab_size":1000000000000,"bos_id":1,"eos_id":2)",
                                   R"("vocab_size":300,"bos_id":1,"eos_id":-1)", R"("vocab_size":300.5,"bos_id":1,"eos_id":2)"}) {
    test::write_text(dir / "tokenizer.json", R"({"kind":"sentencepiece-bpe",)" + fields + R"(,"model_file":"m.model"})");
    try {
      read_tokenizer_info(dir.path());
      ADD_FAILURE() << fields << " was accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("is malformed"), std::string::npos) << e.what();
    }
  }
}

// One small BPE model shared by the sentencepiece tests (training takes ~50 ms).
class DataSentencePiece : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kVocab = 400;

  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    int next = 0;
    DocumentSource source = [&](std::string& text) {
      if (next == 12) return false;
      text = test::generated_document(static_cast<std::uint32_t>(100 + next++), 30);
      return true;
    };
    train_sentencepiece_bpe(source, kVocab, dir_->path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static ScratchDir* dir_;
};

ScratchDir* DataSentencePiece::dir_ = nullptr;

// A damaged model file is named in plain words, without the library's source lines and protobuf calls.
TEST_F(DataSentencePiece, ADamagedModelIsNamedWithoutTheLibrarysInternals) {
  ScratchDir copy;
  std::filesystem::copy(dir_->path(), copy.path(), std::filesystem::copy_options::recursive);
  const std::string model_file = read_tokenizer_info(copy.path()).model_file;
  test::write_text(copy / model_file, "not a sentencepiece model at all");
  try {
    load_tokenizer(copy.path());
    FAIL() << "a damaged model was loaded";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("is not a valid sentencepiece model: its bytes do not read as one"), std::string::npos)
        << message;
    EXPECT_EQ(message.find(".cc("), std::string::npos) << message;
  }
}

TEST_F(DataSentencePiece, HasTheRequestedVocabularyAndIds) {
  auto tokenizer = load_tokenizer(dir_->path());
  EXPECT_EQ(tokenizer->kind(), "sentencepiece-bpe");
  EXPECT_EQ(tokenizer->vocab_size(), kVocab);
  EXPECT_EQ(tokenizer->bos_id(), 1u);
  EXPECT_EQ(tokenizer->eos_id(), 2u);
}

TEST_F(DataSentencePiece, RoundTripsTextWithSpacesNewlinesAndUnicode) {
  auto tokenizer = load_tokenizer(dir_->path());
  for (std::string text : {std::string("The quick brown fox jumps over the lazy dog.\nThen water falls.\n"),
                           std::string("  two  spaces\tand a tab\n\nnew paragraph "),
                           std::string("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC zebra XYZ 12345")}) {
    std::vector<std::uint32_t> ids = tokenizer->encode(text);
    EXPECT_EQ(tokenizer->decode(ids), text);
    for (auto id : ids) {
      EXPECT_LT(id, kVocab);
      EXPECT_NE(id, 0u) << "byte fallback should avoid <unk>";
    }
  }
}

TEST_F(DataSentencePiece, MergesFrequentWords) {
  auto tokenizer = load_tokenizer(dir_->path());
  std::string text = "The river and the stone";
  EXPECT_LT(tokenizer->encode(text).size(), text.size() / 2);
}

TEST_F(DataSentencePiece, DecodeSkipsBosAndEos) {
  auto tokenizer = load_tokenizer(dir_->path());
  std::vector<std::uint32_t> ids = tokenizer->encode("green house");
  ids.insert(ids.begin(), tokenizer->bos_id());
  ids.push_back(tokenizer->eos_id());
  EXPECT_EQ(tokenizer->decode(ids), "green house");
}

// CachedEncoder cuts text before each space and each literal "▁" and encodes word by word: the ids must
// be those of the whole text, including where the cut points pile up or sit next to bytes the model
// does not know.
TEST_F(DataSentencePiece, CachedEncoderGivesTheIdsOfTheWholeText) {
  auto tokenizer = load_tokenizer(dir_->path());
  ASSERT_TRUE(CachedEncoder::exact_by_words(*tokenizer));
  EXPECT_FALSE(CachedEncoder::exact_by_words(ByteTokenizer()));
  CachedEncoder encoder(*tokenizer, true, 1000);
  std::vector<std::string> texts;
  for (std::uint32_t seed = 200; seed < 230; ++seed) texts.push_back(test::generated_document(seed, 5));
  texts.push_back("  two  spaces,   three, \t tab \t\n newline\n\n  and trailing   ");
  texts.push_back("river\xE2\x96\x81stone \xE2\x96\x81\xE2\x96\x81 green\xE2\x96\x81 \xE2\x96\x81");
  texts.push_back("bad \xFF\xFE bytes \xE2\x96 cut \xE2 short\xE2\x96");
  texts.push_back("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC zebra XYZ 12345 " + std::string(100, 'x') + " water");
  texts.push_back(" ");
  texts.push_back("");
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reads the words from the cache
    for (const auto& text : texts) {
      std::vector<std::uint32_t> ids{7};  // encode appends
      encoder.encode(text, ids);
      std::vector<std::uint32_t> expected{7};
      for (auto id : tokenizer->encode(text)) expected.push_back(id);
      EXPECT_EQ(ids, expected) << "text: " << text;
    }
  }
  EXPECT_GT(encoder.cached_words(), 20u);
  EXPECT_LE(encoder.cached_words(), 1000u);
}

// Note "long-words": a word longer than a text file's longest part is encoded in pieces of at most that length,
// cut between characters: each piece's ids are those of the piece (before: the whole word went to sentencepiece,
// whose time and memory grow faster than its length).
TEST_F(DataSentencePiece, ALongWordWithoutSpacesIsEncodedInPiecesCutBetweenCharacters) {
  auto tokenizer = load_tokenizer(dir_->path());
  CachedEncoder encoder(*tokenizer, true, 1000);
  std::string word;
  while (word.size() < 3 * 64 * 1024)
    word +=
        "\xE6\x97\xA5\xE6\x9C\xAC"
        "river";  // 3-byte characters among ASCII
  std::vector<std::uint32_t> ids;
  encoder.encode(word, ids);
  std::vector<std::uint32_t> expected;
  std::string_view rest = word;
  std::vector<std::size_t> cuts;
  while (!rest.empty()) {
    std::size_t cut = std::min<std::size_t>(rest.size(), 64 * 1024);
    while (cut < rest.size() && (static_cast<unsigned char>(rest[cut]) & 0xC0) == 0x80) --cut;
    for (auto id : tokenizer->encode(rest.substr(0, cut))) expected.push_back(id);
    rest.remove_prefix(cut);
    cuts.push_back(cut);
  }
  EXPECT_GE(cuts.size(), 3u);
  EXPECT_EQ(ids, expected);
  EXPECT_NE(ids, tokenizer->encode(word));  // the cuts show: no merge crosses them (a cut falls inside "river")
  EXPECT_EQ(tokenizer->decode(ids), word);  // nothing lost at the cuts
}

TEST_F(DataSentencePiece, CopiedFilesLoadAndEncodeTheSame) {
  ScratchDir copy;
  EXPECT_EQ(tokenizer_file_names(dir_->path()), (std::vector<std::string>{"tokenizer.json", "tokenizer.model"}));
  copy_tokenizer_files(dir_->path(), copy.path());
  auto original = load_tokenizer(dir_->path());
  auto copied = load_tokenizer(copy.path());
  EXPECT_EQ(copied->encode("the old road walks north"), original->encode("the old road walks north"));
}

TEST_F(DataSentencePiece, MissingModelFileIsADataError) {
  ScratchDir copy;
  std::filesystem::copy_file(dir_->path() / "tokenizer.json", copy / "tokenizer.json");
  EXPECT_THROW(load_tokenizer(copy.path()), DataError);
}

TEST(DataSentencePieceTraining, VocabularyTooSmallForTheCharactersIsADataError) {
  ScratchDir dir;
  bool given = false;
  DocumentSource one_line = [&](std::string& text) {
    if (given) return false;
    text = "abcdefghijklmnopqrstuvwxyz\n";
    return given = true;
  };
  try {
    train_sentencepiece_bpe(one_line, 260, dir.path());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("need 285"), std::string::npos) << e.what();
  }
}

TEST(DataSentencePieceTraining, VocabularyTooLargeForTheCorpusIsADataError) {
  ScratchDir dir;
  bool given = false;
  DocumentSource one_line = [&](std::string& text) {
    if (given) return false;
    text = "tiny corpus\n";
    return given = true;
  };
  try {
    train_sentencepiece_bpe(one_line, 5000, dir.path());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab-size"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "tokenizer.json"));
}

}  // namespace
}  // namespace loco::data
