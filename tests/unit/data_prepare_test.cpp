// prepare_dataset: corpus reading (text, directories, JSONL), the split, shards and meta.json, and
// the errors a user can run into.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "loco/data/dataset_meta.h"
#include "loco/data/document_split.h"
#include "loco/data/loco_made.h"
#include "loco/data/prepare.h"
#include "loco/data/token_dataset.h"
#include "loco/data/tokenizer.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"
#include "unit/data_test_helpers.h"

namespace loco::data {
namespace {

using test::ScratchDir;
using test::write_text;

PrepareOptions byte_options(std::vector<fs::path> inputs, fs::path out, double val_fraction = 0.25) {
  PrepareOptions options;
  options.inputs = std::move(inputs);
  options.out_dir = std::move(out);
  options.tokenizer = "byte";
  options.val_fraction = val_fraction;
  return options;
}

std::string prepare_error(const PrepareOptions& options) {
  try {
    prepare_dataset(options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The documents of one split, decoded: the text between each BOS and the next EOS.
std::vector<std::string> split_documents_text(const fs::path& dir, const std::string& split) {
  TokenDataset data = TokenDataset::open(dir, split);
  std::vector<std::int64_t> tokens(data.size());
  data.copy_tokens(0, data.size(), tokens.data());
  auto tokenizer = load_tokenizer(dir);
  std::vector<std::string> documents;
  std::vector<std::uint32_t> current;
  for (std::int64_t token : tokens) {
    if (static_cast<std::uint32_t>(token) == tokenizer->bos_id()) {
      current.clear();
    } else if (static_cast<std::uint32_t>(token) == tokenizer->eos_id()) {
      documents.push_back(tokenizer->decode(current));
    } else {
      current.push_back(static_cast<std::uint32_t>(token));
    }
  }
  return documents;
}

TEST(DataPrepare, TextDirectoryAndJsonlMakeTheRightCounts) {
  ScratchDir scratch;
  write_text(scratch / "corpus/b.txt", "second file\n");
  write_text(scratch / "corpus/a.txt", "first file\n");
  write_text(scratch / "corpus/nested/c.txt", "nested file\n");
  write_text(scratch / "corpus/.hidden.txt", "hidden, skipped\n");
  write_text(scratch / "corpus/.git/d.txt", "hidden directory, skipped\n");
  write_text(scratch / "corpus/blank.txt", " \n\t\n");
  write_text(scratch / "extra.jsonl",
             "{\"text\": \"json one\"}\n\n{\"text\": \"json two\", \"id\": 2}\n{\"text\": \"  \"}\n");

  PrepareSummary summary =
      prepare_dataset(byte_options({scratch / "corpus", scratch / "extra.jsonl"}, scratch / "out"));
  EXPECT_EQ(summary.documents, 5u);
  EXPECT_EQ(summary.vocab_size, 258u);
  std::uint64_t text_bytes = 12 + 11 + 12 + 8 + 8;
  EXPECT_EQ(summary.train_tokens + summary.val_tokens, text_bytes + 2 * 5);
  EXPECT_GT(summary.val_tokens, 0u);

  DatasetMeta meta = read_dataset_meta(scratch / "out");
  EXPECT_EQ(meta.train.documents + meta.val.documents, 5u);
  EXPECT_EQ(meta.train.tokens, summary.train_tokens);
  EXPECT_EQ(meta.val.tokens, summary.val_tokens);
  EXPECT_EQ(meta.tokenizer["kind"], "byte");
  EXPECT_EQ(meta.bytes_per_token, 2u);
  EXPECT_EQ(meta.sources.size(), 2u);
  for (const auto& shard : meta.train.shards) {
    EXPECT_EQ(meta.checksums.at(shard), crc32_hex_of_file(scratch / "out" / shard));
  }
}

TEST(DataPrepare, SplitIsByWholeDocumentsAndDisjoint) {
  ScratchDir scratch;
  std::vector<std::string> texts = test::write_generated_corpus(scratch / "corpus", 20, 3);
  prepare_dataset(byte_options({scratch / "corpus"}, scratch / "out", 0.2));
  std::vector<std::string> train = split_documents_text(scratch / "out", "train");
  std::vector<std::string> val = split_documents_text(scratch / "out", "val");
  EXPECT_FALSE(val.empty());
  EXPECT_FALSE(train.empty());
  std::multiset<std::string> all(train.begin(), train.end());
  all.insert(val.begin(), val.end());
  EXPECT_EQ(all, std::multiset<std::string>(texts.begin(), texts.end()));
  for (const auto& doc : val) EXPECT_EQ(std::count(train.begin(), train.end(), doc), 0);
}

TEST(DataPrepare, SameSeedSameShardsOtherSeedOtherSplit) {
  ScratchDir scratch;
  test::write_generated_corpus(scratch / "corpus", 20, 3);
  prepare_dataset(byte_options({scratch / "corpus"}, scratch / "a"));
  prepare_dataset(byte_options({scratch / "corpus"}, scratch / "b"));
  PrepareOptions other = byte_options({scratch / "corpus"}, scratch / "c");
  other.seed = 99;
  prepare_dataset(other);
  EXPECT_EQ(read_dataset_meta(scratch / "a").checksums, read_dataset_meta(scratch / "b").checksums);
  EXPECT_NE(read_dataset_meta(scratch / "a").checksums, read_dataset_meta(scratch / "c").checksums);
}

TEST(DataPrepare, SmallShardLimitSpreadsTheTrainSplitOverShards) {
  ScratchDir scratch;
  test::write_generated_corpus(scratch / "corpus", 6, 2);
  PrepareSummary summary = prepare_dataset(byte_options({scratch / "corpus"}, scratch / "out"), PrepareLimits{100});
  DatasetMeta meta = read_dataset_meta(scratch / "out");
  EXPECT_EQ(meta.train.shards.size(), (summary.train_tokens + 99) / 100);
  EXPECT_GE(meta.train.shards.size(), 3u);
  EXPECT_EQ(TokenDataset::open(scratch / "out", "train").size(), summary.train_tokens);
  EXPECT_EQ(split_documents_text(scratch / "out", "train").size(), meta.train.documents);
}

TEST(DataPrepare, BpeTokenizerIsTrainedAndStoredWithTheData) {
  ScratchDir scratch;
  std::vector<std::string> texts = test::write_generated_corpus(scratch / "corpus", 10, 30);
  PrepareOptions options = byte_options({scratch / "corpus"}, scratch / "out", 0.1);
  options.tokenizer = "bpe";
  options.vocab_size = 400;
  PrepareSummary summary = prepare_dataset(options);
  EXPECT_EQ(summary.vocab_size, 400u);
  auto tokenizer = load_tokenizer(scratch / "out");
  EXPECT_EQ(tokenizer->kind(), "sentencepiece-bpe");
  EXPECT_EQ(read_dataset_meta(scratch / "out").tokenizer["model_file"], "tokenizer.model");
  EXPECT_EQ(read_dataset_meta(scratch / "out").tokenizer_hash, tokenizer_hash(scratch / "out"));
  EXPECT_EQ(tokenizer_hash(scratch / "out").rfind("sentencepiece-bpe crc32:", 0), 0u);
  std::vector<std::string> val = split_documents_text(scratch / "out", "val");
  ASSERT_GE(val.size(), 1u);
  for (const auto& doc : val) {
    EXPECT_NE(std::find(texts.begin(), texts.end(), doc), texts.end()) << "decodes to a document";
  }
}

TEST(DataPrepare, EarlierOutputInsideTheInputIsNotReadBack) {
  ScratchDir scratch;
  test::write_generated_corpus(scratch / "corpus", 4, 2);
  write_text(scratch / "corpus/out/train_000.bin", "left over from an interrupted run");
  write_text(scratch / "corpus/out" / kPrepareMarkerFileName, "");
  PrepareSummary summary = prepare_dataset(byte_options({scratch / "corpus"}, scratch / "corpus/out"));
  EXPECT_EQ(summary.documents, 4u);
}

TEST(DataPrepare, EmptyCorpusIsADataError) {
  ScratchDir scratch;
  write_text(scratch / "corpus/empty.txt", "");
  write_text(scratch / "corpus/spaces.txt", "   \n\n");
  std::string error = prepare_error(byte_options({scratch / "corpus"}, scratch / "out"));
  EXPECT_NE(error.find("no text found in"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(scratch / "out/meta.json"));
}

TEST(DataPrepare, MissingInputIsADataError) {
  ScratchDir scratch;
  std::string error = prepare_error(byte_options({scratch / "absent.txt"}, scratch / "out"));
  EXPECT_NE(error.find("absent.txt does not exist"), std::string::npos) << error;
}

TEST(DataPrepare, BadJsonlLineNamesFileAndLine) {
  ScratchDir scratch;
  write_text(scratch / "docs.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"oops\"\n");
  std::string error = prepare_error(byte_options({scratch / "docs.jsonl"}, scratch / "out"));
  EXPECT_NE(error.find("docs.jsonl:2: not valid JSON"), std::string::npos) << error;

  write_text(scratch / "other.jsonl", "{\"body\": \"no text field\"}\n");
  error = prepare_error(byte_options({scratch / "other.jsonl"}, scratch / "out"));
  EXPECT_NE(error.find("other.jsonl:1: no string \"text\" field"), std::string::npos) << error;
}

TEST(DataPrepare, TextFieldNamesTheJsonlFieldThatHoldsTheText) {
  ScratchDir scratch;
  write_text(scratch / "docs.jsonl",
             "{\"text\": \"not this\", \"body\": \"first body\"}\n{\"body\": \"second body\", \"id\": 7}\n");
  PrepareOptions options = byte_options({scratch / "docs.jsonl"}, scratch / "out", 0);
  options.text_field = "body";
  const PrepareSummary summary = prepare_dataset(options);
  EXPECT_EQ(summary.documents, 2u);
  std::vector<std::string> train = split_documents_text(scratch / "out", "train");
  EXPECT_EQ(train, (std::vector<std::string>{"first body", "second body"}));

  // The default field is "text": the second line has none, and the message names the flag.
  const std::string error = prepare_error(byte_options({scratch / "docs.jsonl"}, scratch / "out2", 0));
  EXPECT_NE(error.find("docs.jsonl:2: no string \"text\" field"), std::string::npos) << error;
  EXPECT_NE(error.find("--text-field"), std::string::npos) << error;

  options.out_dir = scratch / "out3";
  options.text_field = "";
  EXPECT_THROW(prepare_dataset(options), ConfigError);
  // Given for text files only, it would be ignored (before: without a word); beside a JSON file it is read.
  write_text(scratch / "a.txt", "a whole document\n");
  options = byte_options({scratch / "a.txt"}, scratch / "out4", 0);
  options.text_field = "body";
  options.text_field_given = true;
  const std::string unused = prepare_error(options);
  EXPECT_NE(unused.find("--text-field body names a field of JSON, CSV, TSV, Parquet or Arrow records, and every "
                        "input is a text file, read whole: drop --text-field"),
            std::string::npos)
      << unused;
  EXPECT_FALSE(fs::exists(scratch / "out4"));
  options.inputs.push_back(scratch / "docs.jsonl");
  EXPECT_EQ(prepare_dataset(options).documents, 3u);
}

TEST(DataPrepare, RefusesToOverwriteAPreparedDirectory) {
  ScratchDir scratch;
  test::write_generated_corpus(scratch / "corpus", 4, 2);
  prepare_dataset(byte_options({scratch / "corpus"}, scratch / "out"));
  std::string meta_before = read_file(scratch / "out/meta.json");
  std::string shard_before = read_file(scratch / "out/train_000.bin");
  write_text(scratch / "corpus/more.txt", "new text\n");
  std::string error = prepare_error(byte_options({scratch / "corpus"}, scratch / "out"));
  EXPECT_NE(error.find("already holds a prepared dataset"), std::string::npos) << error;
  EXPECT_EQ(read_file(scratch / "out/meta.json"), meta_before);
  EXPECT_EQ(read_file(scratch / "out/train_000.bin"), shard_before);
}

TEST(DataPrepare, SingleDocumentNeedsValFractionZero) {
  ScratchDir scratch;
  write_text(scratch / "one.txt", "just one document\n");
  std::string error = prepare_error(byte_options({scratch / "one.txt"}, scratch / "out"));
  EXPECT_NE(error.find("--val-fraction 0"), std::string::npos) << error;
  PrepareSummary summary = prepare_dataset(byte_options({scratch / "one.txt"}, scratch / "out", 0));
  EXPECT_EQ(summary.val_tokens, 0u);
  EXPECT_EQ(summary.train_tokens, 18u + 2);
}

// A corpus that is one long text file (a book, tiny-shakespeare's input.txt) is cut into documents (note
// "text-parts"), so it prepares with the default split: val holds some of its parts, train the rest, and
// every token of the file is in one of them.
TEST(DataPrepare, OneLongTextFileIsSplitByItsParts) {
  ScratchDir scratch;
  std::string book;
  for (std::uint32_t i = 0; book.size() < (2u << 20); ++i) book += test::generated_document(i, 30) + "\n";
  write_text(scratch / "book.txt", book);
  const PrepareSummary summary = prepare_dataset(byte_options({scratch / "book.txt"}, scratch / "out", 0.05));
  EXPECT_GE(summary.documents, 2u * 1024 / 32);  // parts of 16 to 32 KiB
  EXPECT_LE(summary.documents, 2u * 1024 / 16);
  EXPECT_GT(summary.val_tokens, 0u);
  EXPECT_GT(summary.train_tokens, summary.val_tokens);
  // Byte tokens, and a begin and an end token around each document.
  EXPECT_EQ(summary.train_tokens + summary.val_tokens, book.size() + 2 * summary.documents);
}

TEST(DataPrepare, BadOptionsAreConfigErrors) {
  ScratchDir scratch;
  write_text(scratch / "a.txt", "text\n");
  EXPECT_THROW(prepare_dataset(byte_options({scratch / "a.txt"}, scratch / "out", 1.0)), ConfigError);
  PrepareOptions options = byte_options({scratch / "a.txt"}, scratch / "out");
  options.tokenizer = "wordpiece";
  EXPECT_THROW(prepare_dataset(options), ConfigError);
}

using test::generated_jsonl;
using test::zstd_frame;

TEST(DataPrepare, SplitFollowsEachDocumentsHash) {
  ScratchDir scratch;
  std::vector<std::string> texts = test::write_generated_corpus(scratch / "corpus", 60, 2);
  prepare_dataset(byte_options({scratch / "corpus"}, scratch / "out", 0.2));
  // Files are read in sorted order (doc_000.txt, ...): document i is (file i, line 0).
  const DocumentSplit split(0.2, 1234);
  std::vector<std::string> expected_val, expected_train;
  for (std::uint32_t i = 0; i < texts.size(); ++i) {
    (split.in_validation(split.hash(i, 0)) ? expected_val : expected_train).push_back(texts[i]);
  }
  ASSERT_FALSE(expected_val.empty());
  EXPECT_EQ(split_documents_text(scratch / "out", "val"), expected_val);  // in corpus order
  // Train keeps the corpus order but for the document held back until the first val document came.
  std::vector<std::string> train = split_documents_text(scratch / "out", "train");
  std::sort(train.begin(), train.end());
  std::sort(expected_train.begin(), expected_train.end());
  EXPECT_EQ(train, expected_train);
}

TEST(DataPrepare, ATinyCorpusStillHoldsOutTheDocumentOfSmallestHash) {
  ScratchDir scratch;
  std::vector<std::string> texts = test::write_generated_corpus(scratch / "corpus", 3, 2);
  const DocumentSplit split(0.01, 1234);
  std::uint32_t smallest = 0;
  for (std::uint32_t i = 0; i < 3; ++i) {
    ASSERT_FALSE(split.in_validation(split.hash(i, 0))) << "pick a seed where no document is drawn for val";
    if (split.hash(i, 0) < split.hash(smallest, 0)) smallest = i;
  }
  prepare_dataset(byte_options({scratch / "corpus"}, scratch / "out", 0.01));
  EXPECT_EQ(split_documents_text(scratch / "out", "val"), std::vector<std::string>{texts[smallest]});
  EXPECT_EQ(split_documents_text(scratch / "out", "train").size(), 2u);
}

// Validation documents, those drawn by their hash and the one a tiny corpus holds out, never reach
// the tokenizer's sample: a word that occurs only in them, 200 times, gets no merges, while the same
// word in one train document does.
TEST(DataPrepare, TheTokenizerNeverSeesValidationText) {
  for (double val_fraction : {0.01, 0.3}) {
    ScratchDir scratch;
    const DocumentSplit split(val_fraction, 1234);
    constexpr std::uint32_t kDocuments = 12;
    std::uint32_t smallest = 0;
    int drawn = 0;
    for (std::uint32_t i = 0; i < kDocuments; ++i) {
      drawn += split.in_validation(split.hash(i, 0));
      if (split.hash(i, 0) < split.hash(smallest, 0)) smallest = i;
    }
    // 0.01 covers the tiny-corpus rule, 0.3 documents drawn by their hash.
    if (val_fraction < 0.1) {
      ASSERT_EQ(drawn, 0);
    } else {
      ASSERT_GT(drawn, 0);
    }
    auto in_val = [&](std::uint32_t i) { return split.in_validation(split.hash(i, 0)) || (drawn == 0 && i == smallest); };
    std::vector<std::string> texts = test::write_generated_corpus(scratch / "corpus", kDocuments, 20);
    auto write_corpus = [&](const std::function<bool(std::uint32_t)>& has_word) {
      for (std::uint32_t i = 0; i < kDocuments; ++i) {
        std::string text = texts[i];
        for (int k = 0; has_word(i) && k < 200; ++k) text += " Xylophonequartz";
        write_text(scratch / "corpus" / fmt::format("doc_{:03}.txt", i), text);
      }
    };
    PrepareOptions options = byte_options({scratch / "corpus"}, scratch / "out", val_fraction);
    options.tokenizer = "bpe";
    options.vocab_size = 400;
    write_corpus(in_val);
    prepare_dataset(options);
    EXPECT_GE(load_tokenizer(scratch / "out")->encode(" Xylophonequartz").size(), 10u) << val_fraction;

    std::uint32_t train_document = 0;
    while (in_val(train_document)) ++train_document;
    write_corpus([&](std::uint32_t i) { return i == train_document; });
    options.out_dir = scratch / "control";
    prepare_dataset(options);
    EXPECT_LE(load_tokenizer(scratch / "control")->encode(" Xylophonequartz").size(), 3u) << val_fraction;
  }
}

// A document larger than the whole sample gives its first lines, up to an eighth of the sample, instead of
// pushing every document out of it. (The 200 KB text file, without blank lines, is seven documents of about
// 32 KiB, larger than the sample: note "text-parts" cuts it at the first line end after 32 KiB.)
TEST(DataPrepare, AHugeDocumentDoesNotEmptyTheTokenizersSample) {
  ScratchDir scratch;
  std::string huge;
  for (std::uint32_t i = 0; huge.size() < 200000; ++i) huge += test::generated_document(i, 10);
  write_text(scratch / "corpus/huge.txt", huge);
  test::write_generated_corpus(scratch / "corpus/small", 6, 20);
  PrepareOptions options = byte_options({scratch / "corpus"}, scratch / "out", 0);
  options.tokenizer = "bpe";
  options.vocab_size = 400;
  options.tokenizer_sample_bytes = 20000;
  const PrepareSummary summary = prepare_dataset(options);
  EXPECT_EQ(summary.documents, 6u + 7);
  EXPECT_EQ(load_tokenizer(scratch / "out")->vocab_size(), 400u);
}

TEST(DataPrepare, ASingleDocumentWithBpeNamesTheFlagThatHelps) {
  ScratchDir scratch;
  write_text(scratch / "one.txt", test::generated_document(1, 40));
  PrepareOptions options = byte_options({scratch / "one.txt"}, scratch / "out", 0.01);
  options.tokenizer = "bpe";
  options.vocab_size = 400;
  const std::string error = prepare_error(options);
  EXPECT_NE(error.find("single document"), std::string::npos) << error;
  EXPECT_NE(error.find("--val-fraction 0"), std::string::npos) << error;
}

TEST(DataPrepare, CompressedInputsGiveTheSameShardsAsPlainOnes) {
  ScratchDir scratch;
  const std::string jsonl = generated_jsonl(200);
  write_text(scratch / "plain/docs.jsonl", jsonl);
  write_text(scratch / "zst/docs.jsonl.zst", zstd_frame(jsonl));
  PrepareOptions options = byte_options({scratch / "plain"}, scratch / "a", 0.1);
  options.tokenizer = "bpe";
  options.vocab_size = 400;
  prepare_dataset(options);
  options.inputs = {scratch / "zst"};
  options.out_dir = scratch / "b";
  prepare_dataset(options);
  EXPECT_EQ(read_dataset_meta(scratch / "a").checksums, read_dataset_meta(scratch / "b").checksums);
  EXPECT_EQ(read_file(scratch / "a/tokenizer.model"), read_file(scratch / "b/tokenizer.model"));

  // A bad line inside a compressed file is reported by its line number.
  write_text(scratch / "bad/docs.jsonl.zst", zstd_frame(generated_jsonl(5) + "{\"text\": 3}\n"));
  const std::string error = prepare_error(byte_options({scratch / "bad"}, scratch / "c"));
  EXPECT_NE(error.find("docs.jsonl.zst:6: its \"text\" field is a number, not a string"), std::string::npos) << error;
}

// The same documents as JSON Lines (.jsonl, or .json.gz as C4 ships them) and as one pretty-printed JSON array
// (.json) prepare to the same shards and tokenizer: an element is numbered as its line would be, so the split
// is the same too.
TEST(DataPrepare, AJsonArrayAndJsonLinesOfTheSameDocumentsGiveTheSameShards) {
  ScratchDir scratch;
  const std::string jsonl = generated_jsonl(200);
  nlohmann::json array = nlohmann::json::array();
  for (std::size_t begin = 0, end; (end = jsonl.find('\n', begin)) != std::string::npos; begin = end + 1) {
    array.push_back(nlohmann::json::parse(jsonl.substr(begin, end - begin)));
  }
  write_text(scratch / "lines/docs.jsonl", jsonl);
  write_text(scratch / "c4/docs.json.zst", zstd_frame(jsonl));
  write_text(scratch / "array/docs.json", array.dump(2));
  PrepareOptions options = byte_options({scratch / "lines"}, scratch / "from-lines", 0.1);
  options.tokenizer = "bpe";
  options.vocab_size = 400;
  prepare_dataset(options);
  for (const char* kind : {"c4", "array"}) {
    options.inputs = {scratch / kind};
    options.out_dir = scratch / fmt::format("from-{}", kind);
    prepare_dataset(options);
    EXPECT_EQ(read_dataset_meta(scratch / "from-lines").checksums, read_dataset_meta(options.out_dir).checksums)
        << kind;
    EXPECT_EQ(read_file(scratch / "from-lines/tokenizer.model"), read_file(options.out_dir / "tokenizer.model"))
        << kind;
  }
}

TEST(DataPrepare, SameShardsForAnyNumberOfThreadsAndBatches) {
  ScratchDir scratch;
  write_text(scratch / "docs.jsonl", generated_jsonl(300));
  std::map<std::string, std::string> first;
  for (unsigned threads : {1u, 2u, 5u}) {
    for (std::uint64_t batch_bytes : {std::uint64_t{700}, std::uint64_t{4} << 20}) {
      PrepareOptions options = byte_options({scratch / "docs.jsonl"}, scratch / fmt::format("t{}-{}", threads, batch_bytes), 0.1);
      options.tokenizer = "bpe";
      options.vocab_size = 400;
      options.threads = threads;
      prepare_dataset(options, PrepareLimits{kTokensPerShard, batch_bytes});
      const auto checksums = read_dataset_meta(options.out_dir).checksums;
      if (first.empty()) first = checksums;
      EXPECT_EQ(checksums, first) << threads << " threads, batches of " << batch_bytes << " bytes";
    }
  }
}

TEST(DataPrepare, TheTokenizerIsTrainedOnASampleOfTheBudget) {
  ScratchDir scratch;
  write_text(scratch / "docs.jsonl", generated_jsonl(400));
  PrepareOptions options = byte_options({scratch / "docs.jsonl"}, scratch / "small", 0.1);
  options.tokenizer = "bpe";
  options.vocab_size = 400;
  options.tokenizer_sample_bytes = 5000;  // about 20 of the 400 documents
  prepare_dataset(options);
  options.out_dir = scratch / "all";
  options.tokenizer_sample_bytes = 1 << 20;
  prepare_dataset(options);
  options.out_dir = scratch / "small-again";
  options.tokenizer_sample_bytes = 5000;
  prepare_dataset(options);
  EXPECT_NE(read_file(scratch / "small/tokenizer.model"), read_file(scratch / "all/tokenizer.model"));
  EXPECT_EQ(read_file(scratch / "small/tokenizer.model"), read_file(scratch / "small-again/tokenizer.model"));
}

TEST(DataPrepare, ARefusedRunTakesBackWhatItWroteAndAKilledRunIsClearedByTheNext) {
  ScratchDir scratch;
  // The bad last line stops the run after the shards of the first 300 documents were written: they are
  // removed again, and so is the directory the run created.
  write_text(scratch / "docs.jsonl", generated_jsonl(300) + "{\"text\": \"oops\"\n");
  PrepareOptions options = byte_options({scratch / "docs.jsonl"}, scratch / "out", 0.1);
  const PrepareLimits tiny{2000, 700};
  EXPECT_THROW(prepare_dataset(options, tiny), DataError);
  EXPECT_FALSE(fs::exists(scratch / "out"));
  // What a killed run leaves: its marker, shards and temporary files, next to the user's own file.
  write_text(scratch / "out" / kPrepareMarkerFileName, "loco prepare is writing this directory\n");
  write_text(scratch / "out/train_000.bin", "a shard of the killed run");
  write_text(scratch / "out/train_999.bin", "a shard of an earlier, longer run");
  write_text(scratch / "out/.val_003.bin.tmp-4242", "a temporary file of a killed run");

  write_text(scratch / "docs.jsonl", generated_jsonl(300));
  prepare_dataset(options, tiny);
  options.out_dir = scratch / "fresh";
  prepare_dataset(options, tiny);
  EXPECT_EQ(read_dataset_meta(scratch / "out").checksums, read_dataset_meta(scratch / "fresh").checksums);
  EXPECT_FALSE(fs::exists(scratch / "out/train_999.bin"));
  EXPECT_FALSE(fs::exists(scratch / "out/.val_003.bin.tmp-4242"));
  EXPECT_FALSE(fs::exists(scratch / "out" / kPrepareMarkerFileName));
  // A run killed right after it probed the directory left only its probe (before: "holds .loco-write-test-…,
  // which `loco prepare` did not write").
  write_text(scratch / "probed/.loco-write-test-12868", "");
  options.out_dir = scratch / "probed";
  prepare_dataset(options, tiny);
  EXPECT_FALSE(fs::exists(scratch / "probed/.loco-write-test-12868"));
  // One killed after it wrote meta.json, before it removed its marker, is whole: its tokenizer serves another
  // (before: "a loco prepare that did not finish … run that prepare again", which refused the whole directory).
  write_text(scratch / "fresh" / kPrepareMarkerFileName, "loco prepare is writing this directory\n");
  options.tokenizer_from = scratch / "fresh";
  options.out_dir = scratch / "from-fresh";
  prepare_dataset(options, tiny);
  EXPECT_TRUE(fs::exists(scratch / "from-fresh" / kMetaFileName));
}

// --out is a new or empty directory (or an interrupted run's): prepare's files beside another's could be taken
// for part of it, or another's for part of the dataset; as root, `--out /` wrote shards into /. The directory
// is refused with nothing touched, as is an --out that is also an input (it used to say "no text found").
TEST(DataPrepare, OnlyANewOrEmptyDirectoryIsWrittenInto) {
  ScratchDir scratch;
  write_text(scratch / "docs.jsonl", generated_jsonl(20));
  write_text(scratch / "other/notes.md", "the user's own file");
  std::string error = prepare_error(byte_options({scratch / "docs.jsonl"}, scratch / "other"));
  EXPECT_NE(error.find("other is not empty: it holds notes.md, which `loco prepare` did not write. Nothing was "
                       "touched; choose a new or empty --out directory"),
            std::string::npos)
      << error;
  EXPECT_EQ(test::read_text(scratch / "other/notes.md"), "the user's own file");
  EXPECT_EQ(std::distance(fs::directory_iterator(scratch / "other"), fs::directory_iterator()), 1);
  // An interrupted run's directory with something else in it.
  write_text(scratch / "killed" / kPrepareMarkerFileName, "");
  write_text(scratch / "killed/train_000.bin", "a shard of the killed run");
  write_text(scratch / "killed/notes.md", "put there later");
  error = prepare_error(byte_options({scratch / "docs.jsonl"}, scratch / "killed"));
  EXPECT_NE(error.find("it holds notes.md"), std::string::npos) << error;
  EXPECT_TRUE(fs::exists(scratch / "killed/train_000.bin"));

  write_text(scratch / "corpus/a.txt", "some text\n");
  error = prepare_error(byte_options({scratch / "corpus"}, scratch / "corpus"));
  EXPECT_NE(error.find("corpus is also the --out directory: give the corpus and the prepared data different "
                       "directories"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(scratch / "corpus" / kPrepareMarkerFileName));
}

// A corpus whose every file was skipped says so, pointing at the reasons printed, instead of "no text found".
TEST(DataPrepare, ACorpusOfSkippedFilesOnlySaysSo) {
  ScratchDir scratch;
  write_text(scratch / "corpus/.a.txt", "hidden text\n");
  write_text(scratch / "corpus/.b.txt", "hidden text\n");
  const std::string error = prepare_error(byte_options({scratch / "corpus"}, scratch / "out"));
  EXPECT_NE(error.find("no corpus files in " + (scratch / "corpus").string() +
                       ": all it holds was skipped, for the reasons said above"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(scratch / "out"));
}

// BPE vocabularies outside what sentencepiece can train are refused before the corpus is read: below 259 it
// failed inside sentencepiece after the sampling pass ("trainer_interface.cc(754) [insert_id(...)]"), above
// 2^31 with "cannot parse as int".
TEST(DataPrepare, ABpeVocabularyOutsideWhatCanBeTrainedIsRefusedFirst) {
  ScratchDir scratch;
  PrepareOptions options = byte_options({scratch / "absent.txt"}, scratch / "out");
  options.tokenizer = "bpe";
  for (const std::uint64_t size : {std::uint64_t{1}, std::uint64_t{258}}) {
    options.vocab_size = size;
    const std::string error = prepare_error(options);
    EXPECT_NE(error.find(fmt::format("--vocab-size {} is too small for a BPE vocabulary: its 256 byte tokens and 3 "
                                     "special tokens alone are 259",
                                     size)),
              std::string::npos)
        << error;
  }
  options.vocab_size = (std::uint64_t{1} << 24) + 1;
  EXPECT_NE(prepare_error(options).find("--vocab-size 16777217 is more tokens than loco trains"), std::string::npos);
  options.vocab_size = std::uint64_t{1} << 32;
  EXPECT_THROW(prepare_dataset(options), ConfigError);
}

// Tokenizer files or shards without the marker of an interrupted prepare belong to something else
// (a checkpoint holds tokenizer files): the directory is refused and nothing in it is touched.
TEST(DataPrepare, ADirectoryWithOtherFilesOfTheseNamesIsRefused) {
  ScratchDir scratch;
  write_text(scratch / "docs.jsonl", generated_jsonl(20));
  write_text(scratch / "checkpoint/tokenizer.json", "a checkpoint's tokenizer");
  write_text(scratch / "checkpoint/state.json", "{}");
  const std::string error = prepare_error(byte_options({scratch / "docs.jsonl"}, scratch / "checkpoint"));
  EXPECT_NE(error.find("was not written by an interrupted `loco prepare`"), std::string::npos) << error;
  EXPECT_EQ(read_file(scratch / "checkpoint/tokenizer.json"), "a checkpoint's tokenizer");
  EXPECT_FALSE(fs::exists(scratch / "checkpoint" / kPrepareMarkerFileName));
}

TEST(DataPrepare, TokenizerFromSharesOneVocabularyAcrossCorpora) {
  ScratchDir scratch;
  write_text(scratch / "first.jsonl", generated_jsonl(100));
  write_text(scratch / "second.txt", test::generated_document(999, 40));
  write_text(scratch / "second2.txt", test::generated_document(998, 40));
  PrepareOptions options = byte_options({scratch / "first.jsonl"}, scratch / "a", 0.1);
  options.tokenizer = "bpe";
  options.vocab_size = 400;
  prepare_dataset(options);
  options.inputs = {scratch / "second.txt", scratch / "second2.txt"};
  options.out_dir = scratch / "b";
  options.tokenizer_from = scratch / "a";
  options.vocab_size = 999;  // ignored: the tokenizer comes from a
  const PrepareSummary summary = prepare_dataset(options);
  EXPECT_EQ(summary.vocab_size, 400u);
  EXPECT_EQ(read_file(scratch / "a/tokenizer.model"), read_file(scratch / "b/tokenizer.model"));
  EXPECT_EQ(read_dataset_meta(scratch / "b").tokenizer_hash, read_dataset_meta(scratch / "a").tokenizer_hash);
  EXPECT_EQ(prepared_tokenizer_hash(scratch / "b"), tokenizer_hash(scratch / "a"));
  std::vector<std::string> documents = split_documents_text(scratch / "b", "train");
  documents.push_back(split_documents_text(scratch / "b", "val").at(0));
  std::sort(documents.begin(), documents.end());
  EXPECT_EQ(documents, (std::vector<std::string>{test::generated_document(998, 40), test::generated_document(999, 40)}));

  options.out_dir = scratch / "c";
  options.tokenizer_from = scratch / "absent";
  std::string error = prepare_error(options);
  EXPECT_NE(error.find("absent"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(scratch / "c/meta.json"));
  // A damaged tokenizer is named where it is, not in --out (which is taken back, and which it was named in).
  fs::create_directories(scratch / "broken");
  fs::copy_file(scratch / "a/tokenizer.json", scratch / "broken/tokenizer.json");
  write_text(scratch / "broken/tokenizer.model", read_file(scratch / "a/tokenizer.model").substr(0, 1000));
  options.tokenizer_from = scratch / "broken";
  error = prepare_error(options);
  EXPECT_NE(error.find((scratch / "broken/tokenizer.model").string() + " is not a valid sentencepiece model"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(scratch / "c"));
  // A prepare that did not finish has a tokenizer of no prepared data (it was taken without a word).
  fs::copy(scratch / "a", scratch / "unfinished");
  write_text(scratch / "unfinished" / kPrepareMarkerFileName, "");
  fs::remove(scratch / "unfinished" / "meta.json");
  options.tokenizer_from = scratch / "unfinished";
  error = prepare_error(options);
  EXPECT_NE(error.find("unfinished is a loco prepare that did not finish (it holds .loco-prepare-incomplete)"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(scratch / "c"));
  // The --out directory itself, however written (before: its own marker was blamed on it).
  options.tokenizer_from = (scratch / "x" / ".." / "c" / "").string();
  error = prepare_error(options);
  EXPECT_NE(error.find("names the --out directory, which this run writes"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(scratch / "c"));
}

// A model's vocabulary: the data's when the config leaves it at 0, the config's when it holds the data's ids,
// refused naming what the data could be prepared as when it does not.
TEST(DataPrepare, AModelTakesTheDatasVocabularyOrOneThatHoldsIt) {
  EXPECT_EQ(model_vocabulary(0, 258, "d"), 258);
  EXPECT_EQ(model_vocabulary(4096, 258, "d"), 4096);
  EXPECT_THROW(model_vocabulary(257, 258, "d"), ConfigError);
  const std::string refusal = test::error_message([] { model_vocabulary(300, 4096, "d"); });
  EXPECT_NE(refusal.find("uses 4096 token ids but model.vocab_size is 300. Set model.vocab_size = 0 to take the "
                         "data's vocabulary, or prepare the data with --vocab-size 300"),
            std::string::npos)
      << refusal;
}

// A path is bytes: an input named in another encoding than UTF-8 is prepared, and meta.json records it with
// U+FFFD (it failed the whole prepare, at its end, with the JSON library's "invalid UTF-8 byte").
TEST(DataPrepare, AnInputNamedInAnotherEncodingIsPrepared) {
  ScratchDir scratch;
  const fs::path latin1 = scratch / "caf\xe9";
  write_text(latin1 / "a.txt", "first document\n");
  write_text(latin1 / "b.txt", "second document\n");
  prepare_dataset(byte_options({latin1}, scratch / "out", 0.5));
  const DatasetMeta meta = read_dataset_meta(scratch / "out");
  ASSERT_EQ(meta.sources.size(), 1u);
  EXPECT_NE(meta.sources[0].find("caf\xef\xbf\xbd"), std::string::npos) << meta.sources[0];
}

}  // namespace
}  // namespace loco::data
