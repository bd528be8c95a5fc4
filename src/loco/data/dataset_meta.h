// meta.json: what a prepared data directory holds. Written last and atomically by `loco prepare`,
// so a directory without it is visibly incomplete (see docs/data.md for the fields).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loco::data {

namespace fs = std::filesystem;

inline constexpr const char* kMetaFileName = "meta.json";

struct SplitMeta {
  std::vector<std::string> shards;  // file names in the data directory, in token order
  std::uint64_t tokens = 0;
  std::uint64_t documents = 0;
};

struct DatasetMeta {
  nlohmann::json tokenizer;  // the contents of tokenizer.json
  std::string tokenizer_hash;  // tokenizer_hash() of the directory's tokenizer; empty in directories before it
  std::uint32_t vocab_size = 0;
  std::uint32_t bytes_per_token = 2;
  SplitMeta train;
  SplitMeta val;
  std::vector<std::string> sources;  // the input paths as given to `loco prepare`
  double val_fraction = 0;
  std::uint64_t seed = 0;
  std::map<std::string, std::string> checksums;  // shard file name -> CRC-32 of the whole file

  // "train" or "val"; DataError for any other name.
  const SplitMeta& split(const std::string& name) const;

  nlohmann::json to_json() const;
};

// Reads DATA_DIR/meta.json; DataError with the fix when missing, malformed or of another format.
DatasetMeta read_dataset_meta(const fs::path& data_dir);

// The tokenizer a prepared directory was encoded with (tokenizer_hash()): as meta.json records it, or
// computed from the directory's tokenizer files when it was prepared before meta.json recorded it.
std::string prepared_tokenizer_hash(const fs::path& data_dir);
// The same, for a meta.json already read from `data_dir`.
std::string prepared_tokenizer_hash(const fs::path& data_dir, const DatasetMeta& meta);

// The directory's tokenizer is the one its tokens were encoded with: tokenizer.json as meta.json recorded it,
// the model file it names by meta.json's hash, and a vocabulary of meta.json's size. DataError with the fix
// otherwise. `loco train` checks this before its first step: the tokenizer is copied into every checkpoint,
// and a run must not train for hours and then fail to write one, or write one whose tokenizer cannot decode
// what its model produces.
void require_prepared_tokenizer(const fs::path& data_dir, const DatasetMeta& meta);

// Writes DATA_DIR/meta.json atomically.
void write_dataset_meta(const fs::path& data_dir, const DatasetMeta& meta);

// The vocabulary of a model of `configured` tokens (model.vocab_size; 0: the data's) trained on data of
// `data_vocab` token ids in `data_dir`. ConfigError when the model is smaller than the data's vocabulary: it
// could not embed its tokens.
std::int64_t model_vocabulary(std::int64_t configured, std::uint32_t data_vocab, const std::string& data_dir);

}  // namespace loco::data
