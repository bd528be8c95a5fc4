// `loco prepare`: corpus files -> tokenizer + token shards (train/val) + meta.json.
//
// The steps, in order (each in its own file): check the output directory; list the documents
// (corpus_reader); split them by document into train and val (document_split); train the BPE
// tokenizer on the train documents or take the byte tokenizer (sentencepiece_tokenizer, tokenizer);
// encode every document as [BOS] + tokens + [EOS] into shards (shard); write meta.json last
// (dataset_meta). Nothing in an existing prepared directory is ever overwritten.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace loco::data {

namespace fs = std::filesystem;

struct PrepareOptions {
  std::vector<fs::path> inputs;
  fs::path out_dir;
  std::uint32_t vocab_size = 8192;
  std::string tokenizer = "bpe";  // "bpe" | "byte"
  double val_fraction = 0.01;
  std::uint64_t seed = 1234;
  std::string text_field = "text";  // the field of a JSONL line that holds its document
};

struct PrepareSummary {
  std::uint64_t documents = 0, train_tokens = 0, val_tokens = 0;
  std::uint32_t vocab_size = 0;
};

PrepareSummary prepare_dataset(const PrepareOptions& options);  // prints progress to stderr

// As above with shards of at most `tokens_per_shard` tokens (tests use tiny shards to cover
// splits that span several files).
PrepareSummary prepare_dataset(const PrepareOptions& options, std::uint64_t tokens_per_shard);

}  // namespace loco::data
