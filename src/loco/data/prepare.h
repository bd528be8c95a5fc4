// `loco prepare`: corpus files -> tokenizer + token shards (train/val) + meta.json, in memory bounded
// whatever the size of the corpus (docs/data.md "Memory").
//
// The steps, in order (each in its own file): check the output directory and clear what an interrupted run
// left in it (kPrepareMarkerFileName); list the corpus files and tell the format of each (corpus_files); the
// tokenizer: the byte tokenizer, one copied from another directory, or a BPE model trained on a seeded sample
// of the train documents read in a first pass (tokenizer_sample, sentencepiece_tokenizer); then one pass that
// streams the documents (corpus_stream; decompressing: byte_stream; refusing what is not text:
// utf8_text_check), encodes them on all cores in a fixed order (encode_pipeline) and writes each to the split
// its position decides (document_split, dataset_writer); meta.json last (dataset_meta). Nothing in a prepared
// directory is ever overwritten.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loco/data/loco_made.h"  // kPrepareMarkerFileName

namespace loco::data {

namespace fs = std::filesystem;

// A BPE vocabulary holds the 256 byte tokens (byte fallback) and <unk>, <s>, </s> at least, and the corpus's
// characters besides; one of 2^24 tokens is far beyond any in use (32k to 256k).
inline constexpr std::uint64_t kFewestBpeTokens = 259;
inline constexpr std::uint64_t kMostBpeTokens = std::uint64_t{1} << 24;

struct PrepareOptions {
  std::vector<fs::path> inputs;
  fs::path out_dir;
  std::uint64_t vocab_size = 8192;  // of a BPE tokenizer: kFewestBpeTokens to kMostBpeTokens
  std::string tokenizer = "bpe";  // "bpe" | "byte"
  fs::path tokenizer_from;        // a prepared directory or checkpoint whose tokenizer to use; empty: none
  double val_fraction = 0.01;
  std::uint64_t seed = 1234;
  std::string text_field = "text";  // the field of a JSONL line that holds its document
  bool text_field_given = false;    // --text-field was given: refused where no input has fields
  std::uint64_t tokenizer_sample_bytes = 32'000'000;  // text the BPE tokenizer is trained on
  unsigned threads = 0;             // encoding threads; 0: one per core
};

struct PrepareSummary {
  std::uint64_t documents = 0, train_tokens = 0, val_tokens = 0;
  std::uint32_t vocab_size = 0;
  std::uint64_t input_bytes = 0;  // the size of the input files on disk
};

// Sizes `loco prepare` uses inside; tests make them tiny to cover splits that span several shards
// and corpora that span many encoding batches.
struct PrepareLimits {
  std::uint64_t tokens_per_shard;
  std::uint64_t batch_bytes = 4 << 20;  // raw input handed to an encoding thread at a time
};

PrepareSummary prepare_dataset(const PrepareOptions& options);  // prints progress to stderr
PrepareSummary prepare_dataset(const PrepareOptions& options, const PrepareLimits& limits);

}  // namespace loco::data
