// Builders of small corpora and prepared data directories for the data-layer tests.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "loco/data/dataset_meta.h"
#include "loco/data/shard.h"
#include "loco/data/tokenizer.h"
#include "support/test_support.h"

namespace loco::test {

// English-looking text: `sentences` lines of 6..14 words drawn from a small vocabulary, so that a
// BPE vocabulary of a few hundred pieces can be trained on a few documents in milliseconds.
inline std::string generated_document(std::uint32_t seed, int sentences) {
  static const std::vector<std::string> words{"the",   "a",     "river", "stone",  "light", "green",  "house", "quick",
                                              "brown", "fox",   "jumps", "over",   "lazy",  "dog",    "and",   "then",
                                              "water", "falls", "under", "bridge", "north", "winter", "small", "garden",
                                              "old",   "road",  "walks", "toward", "city",  "of"};
  std::mt19937 rng(seed);
  std::string text;
  for (int s = 0; s < sentences; ++s) {
    int length = 6 + static_cast<int>(rng() % 9);
    for (int w = 0; w < length; ++w) {
      std::string word = words[rng() % words.size()];
      if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
      text += (w == 0 ? "" : " ") + word;
    }
    text += ".\n";
  }
  return text;
}

// Writes `count` generated documents DIR/doc_000.txt ... and returns their texts.
inline std::vector<std::string> write_generated_corpus(const std::filesystem::path& dir, int count,
                                                       int sentences = 20) {
  std::vector<std::string> texts;
  for (int i = 0; i < count; ++i) {
    texts.push_back(generated_document(static_cast<std::uint32_t>(i + 1), sentences));
    char name[32];
    std::snprintf(name, sizeof(name), "doc_%03d.txt", i);
    write_text(dir / name, texts.back());
  }
  return texts;
}

// A hand-made prepared directory whose train split holds the tokens 0, 1, 2, ... (token value ==
// position, so a test can tell which window it got) in shards of the given sizes, and a val split
// of `val_tokens` such tokens. The vocabulary is large enough for every position.
inline void write_positional_dataset(const std::filesystem::path& dir,
                                     const std::vector<std::uint64_t>& train_shard_sizes,
                                     std::uint64_t val_tokens = 0) {
  std::filesystem::create_directories(dir);
  std::uint64_t total = val_tokens;
  for (auto size : train_shard_sizes) total += size;
  data::DatasetMeta meta;
  meta.vocab_size = static_cast<std::uint32_t>(total + 1);
  meta.bytes_per_token = data::bytes_per_token_for(meta.vocab_size);
  meta.tokenizer = data::ByteTokenizer::info().to_json();
  auto write_shards = [&](const std::string& split, const std::vector<std::uint64_t>& sizes, data::SplitMeta& out) {
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      std::vector<std::uint32_t> tokens(sizes[s]);
      for (auto& t : tokens) t = static_cast<std::uint32_t>(out.tokens++);
      out.shards.push_back(data::shard_file_name(split, s));
      data::ShardWriter writer(dir / out.shards.back(), meta.bytes_per_token);
      writer.append(tokens.data(), tokens.size());
      writer.finish();
    }
    out.documents = 1;
  };
  write_shards("train", train_shard_sizes, meta.train);
  write_shards("val", {val_tokens}, meta.val);
  data::write_dataset_meta(dir, meta);
}

// A JSONL corpus of `count` generated documents, one per line.
inline std::string generated_jsonl(int count, int sentences = 3) {
  std::string jsonl;
  for (int i = 0; i < count; ++i) {
    jsonl += nlohmann::json{{"id", i}, {"text", generated_document(static_cast<std::uint32_t>(i + 1), sentences)}}
                 .dump() +
             "\n";
  }
  return jsonl;
}

// `bytes` as one zstd frame (level 3).
inline std::string zstd_frame(const std::string& bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3));
  return out;
}

}  // namespace loco::test
