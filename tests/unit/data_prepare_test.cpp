// prepare_dataset: corpus reading (text, directories, JSONL), the split, shards and meta.json, and
// the errors a user can run into.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loco/data/dataset_meta.h"
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
  PrepareSummary summary = prepare_dataset(byte_options({scratch / "corpus"}, scratch / "out"), 100);
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
  std::vector<std::string> val = split_documents_text(scratch / "out", "val");
  ASSERT_EQ(val.size(), 1u);
  EXPECT_NE(std::find(texts.begin(), texts.end(), val[0]), texts.end()) << "decodes to a document";
}

TEST(DataPrepare, EarlierOutputInsideTheInputIsNotReadBack) {
  ScratchDir scratch;
  test::write_generated_corpus(scratch / "corpus", 4, 2);
  write_text(scratch / "corpus/out/train_000.bin", "left over from an interrupted run");
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
  std::sort(train.begin(), train.end());  // the split shuffles the documents
  EXPECT_EQ(train, (std::vector<std::string>{"first body", "second body"}));

  // The default field is "text": the second line has none, and the message names the flag.
  const std::string error = prepare_error(byte_options({scratch / "docs.jsonl"}, scratch / "out2", 0));
  EXPECT_NE(error.find("docs.jsonl:2: no string \"text\" field"), std::string::npos) << error;
  EXPECT_NE(error.find("--text-field"), std::string::npos) << error;

  options.out_dir = scratch / "out3";
  options.text_field = "";
  EXPECT_THROW(prepare_dataset(options), ConfigError);
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

TEST(DataPrepare, BadOptionsAreConfigErrors) {
  ScratchDir scratch;
  write_text(scratch / "a.txt", "text\n");
  EXPECT_THROW(prepare_dataset(byte_options({scratch / "a.txt"}, scratch / "out", 1.0)), ConfigError);
  PrepareOptions options = byte_options({scratch / "a.txt"}, scratch / "out");
  options.tokenizer = "wordpiece";
  EXPECT_THROW(prepare_dataset(options), ConfigError);
}

}  // namespace
}  // namespace loco::data
