#include "loco/data/prepare.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <utility>

#include "loco/data/corpus_reader.h"
#include "loco/data/dataset_meta.h"
#include "loco/data/document_split.h"
#include "loco/data/parallel_encode.h"
#include "loco/data/sentencepiece_tokenizer.h"
#include "loco/data/shard.h"
#include "loco/data/tokenizer.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/seconds_since.h"

namespace loco::data {

namespace {

using Clock = SteadyClock;

template <typename... Args>
void progress(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "prepare: {}\n", fmt::format(format, std::forward<Args>(args)...));
}

void check_options(const PrepareOptions& options) {
  if (options.out_dir.empty()) throw ConfigError("no output directory; pass --out DIR.");
  if (options.tokenizer != "bpe" && options.tokenizer != "byte") {
    throw ConfigError(fmt::format("unknown tokenizer '{}'; use bpe or byte.", options.tokenizer));
  }
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    throw ConfigError(fmt::format("--val-fraction must be at least 0 and below 1, got {}.", options.val_fraction));
  }
  if (options.text_field.empty()) {
    throw ConfigError("--text-field is empty; name the field of each JSONL line that holds its text (default: text).");
  }
}

void refuse_prepared_directory(const fs::path& out_dir) {
  if (fs::exists(out_dir / kMetaFileName)) {
    throw DataError(
        fmt::format("{} already holds a prepared dataset (it has a meta.json); nothing was overwritten. Choose "
                    "another --out directory or delete this one.",
                    out_dir.string()));
  }
}

// Writes the tokenizer files into out_dir (training BPE on the train documents) and loads them
// back, so that what is used to encode is exactly what later runs will load.
std::unique_ptr<Tokenizer> build_tokenizer(const PrepareOptions& options, const CorpusReader& corpus,
                                           const std::vector<std::uint64_t>& train_documents) {
  if (options.tokenizer == "byte") {
    write_tokenizer_info(options.out_dir, ByteTokenizer::info());
  } else {
    auto start = Clock::now();
    progress("training a sentencepiece BPE tokenizer with {} tokens on the train documents", options.vocab_size);
    std::size_t next = 0;
    DocumentSource source = [&](std::string& text) {
      if (next == train_documents.size()) return false;
      text = corpus.text(corpus.documents()[train_documents[next++]]);
      return true;
    };
    train_sentencepiece_bpe(source, options.vocab_size, options.out_dir);
    progress("trained the tokenizer in {:.1f} s", seconds_since(start));
  }
  return load_tokenizer(options.out_dir);
}

// Encodes the documents as [BOS] + tokens + [EOS] into the shards of one split, a batch of
// documents at a time so that memory stays bounded while all cores encode.
SplitMeta write_split(const std::string& split, const std::vector<std::uint64_t>& documents, const CorpusReader& corpus,
                      const Tokenizer& tokenizer, const fs::path& out_dir, std::uint64_t tokens_per_shard) {
  constexpr std::uint64_t kBatchBytes = 64 << 20;
  SplitWriter writer(out_dir, split, bytes_per_token_for(tokenizer.vocab_size()), tokens_per_shard);
  SplitMeta meta;
  auto last_report = Clock::now();
  for (std::size_t next = 0; next < documents.size();) {
    std::vector<std::string> texts;
    for (std::uint64_t bytes = 0; next < documents.size() && bytes < kBatchBytes; ++next) {
      const Document& document = corpus.documents()[documents[next]];
      texts.push_back(corpus.text(document));
      bytes += document.text_bytes;
    }
    for (const auto& tokens : encode_documents(tokenizer, texts)) {
      writer.append(tokens);
      meta.tokens += tokens.size();
    }
    meta.documents += texts.size();
    if (seconds_since(last_report) > 10) {
      progress("{}: {} of {} documents, {} tokens", split, meta.documents, documents.size(), meta.tokens);
      last_report = Clock::now();
    }
  }
  meta.shards = writer.finish();
  return meta;
}

}  // namespace

PrepareSummary prepare_dataset(const PrepareOptions& options) { return prepare_dataset(options, kTokensPerShard); }

PrepareSummary prepare_dataset(const PrepareOptions& options, std::uint64_t tokens_per_shard) {
  check_options(options);
  refuse_prepared_directory(options.out_dir);
  ensure_writable_directory(options.out_dir, "--out directory");

  CorpusReader corpus = CorpusReader::open(options.inputs, options.out_dir, options.text_field);
  std::vector<std::uint64_t> text_bytes;
  for (const auto& document : corpus.documents()) text_bytes.push_back(document.text_bytes);
  progress("{} documents, {:.1f} MB of text in {} files", text_bytes.size(),
           static_cast<double>(corpus.text_bytes()) / 1e6, corpus.files().size());
  DocumentSplit split = split_documents(text_bytes, options.val_fraction, options.seed);

  std::unique_ptr<Tokenizer> tokenizer = build_tokenizer(options, corpus, split.train);

  auto start = Clock::now();
  DatasetMeta meta;
  meta.tokenizer = read_tokenizer_info(options.out_dir).to_json();
  meta.vocab_size = tokenizer->vocab_size();
  meta.bytes_per_token = bytes_per_token_for(meta.vocab_size);
  meta.train = write_split("train", split.train, corpus, *tokenizer, options.out_dir, tokens_per_shard);
  meta.val = write_split("val", split.val, corpus, *tokenizer, options.out_dir, tokens_per_shard);
  progress("encoded {} tokens in {:.1f} s", meta.train.tokens + meta.val.tokens, seconds_since(start));
  for (const SplitMeta* written : {&meta.train, &meta.val}) {
    for (const auto& shard : written->shards) meta.checksums[shard] = crc32_hex_of_file(options.out_dir / shard);
  }
  for (const auto& input : options.inputs) meta.sources.push_back(input.string());
  meta.val_fraction = options.val_fraction;
  meta.seed = options.seed;
  write_dataset_meta(options.out_dir, meta);  // last: its presence marks the directory complete

  return PrepareSummary{meta.train.documents + meta.val.documents, meta.train.tokens, meta.val.tokens, meta.vocab_size};
}

}  // namespace loco::data
