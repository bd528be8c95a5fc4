// Tokenizers: the interface the trainer, eval and generation use, and the files that describe one.
//
// A tokenizer lives in a directory as tokenizer.json (kind, vocab size, BOS/EOS ids, model file)
// plus, for sentencepiece, the model file it names. The same files sit in a prepared data directory
// and in every checkpoint, so a checkpoint can be used without the data it was trained on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "loco/data/vocabulary_piece.h"

namespace loco::data {

namespace fs = std::filesystem;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<std::uint32_t> encode(std::string_view text) const = 0;   // no BOS/EOS added
  // Appends encode(text) to `ids`, growing it once, with room for one id more (the EOS that ends a document):
  // grown by doubling, the ids of a document of 200 MB held 1.6 GB at once.
  virtual void encode_into(std::string_view text, std::vector<std::uint32_t>& ids) const;
  virtual std::string decode(const std::vector<std::uint32_t>& ids) const = 0;  // skips BOS/EOS
  virtual std::uint32_t vocab_size() const = 0;
  virtual std::uint32_t bos_id() const = 0;
  virtual std::uint32_t eos_id() const = 0;
  virtual std::string kind() const = 0;  // "byte" or "sentencepiece-bpe"
  virtual std::vector<VocabularyPiece> vocabulary() const = 0;  // entry i is id i
};

// Reads DIR/tokenizer.json (+ the model file it names, e.g. tokenizer.model). DataError if missing.
std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& dir);

// Copies tokenizer.json and its model file (if any) from one directory to another (used to make
// checkpoints self-contained). Each file is written atomically.
void copy_tokenizer_files(const fs::path& from_dir, const fs::path& to_dir);

// Names of the files copy_tokenizer_files copies (for checksumming): e.g.
// {"tokenizer.json","tokenizer.model"}.
std::vector<std::string> tokenizer_file_names(const fs::path& dir);

// Which tokenizer DIR holds, to refuse mixing data and models made with different ones: "byte", or
// "sentencepiece-bpe crc32:XXXXXXXX" with the CRC-32 of the model file. A checksum, not a
// cryptographic hash: it guards against accidents (two corpora prepared with their own tokenizers),
// not against someone crafting a colliding model; two different models share it with odds of 2^-32.
std::string tokenizer_hash(const fs::path& dir);

// The contents of tokenizer.json.
struct TokenizerInfo {
  std::string kind;
  std::uint32_t vocab_size = 0;
  std::uint32_t bos_id = 0;
  std::uint32_t eos_id = 0;
  std::string model_file;  // empty for the byte tokenizer

  nlohmann::json to_json() const;
};

inline constexpr const char* kTokenizerFileName = "tokenizer.json";

// Writes DIR/tokenizer.json atomically.
void write_tokenizer_info(const fs::path& dir, const TokenizerInfo& info);

// Reads and validates DIR/tokenizer.json.
TokenizerInfo read_tokenizer_info(const fs::path& dir);

// Bytes are ids 0..255, then BOS = 256 and EOS = 257: every byte string round-trips exactly.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr std::uint32_t kBos = 256;
  static constexpr std::uint32_t kEos = 257;
  static constexpr std::uint32_t kVocabSize = 258;

  std::vector<std::uint32_t> encode(std::string_view text) const override;
  void encode_into(std::string_view text, std::vector<std::uint32_t>& ids) const override;  // with no copy
  std::string decode(const std::vector<std::uint32_t>& ids) const override;
  std::uint32_t vocab_size() const override { return kVocabSize; }
  std::uint32_t bos_id() const override { return kBos; }
  std::uint32_t eos_id() const override { return kEos; }
  std::string kind() const override { return "byte"; }
  // "<0x00>" … "<0xFF>", then "<s>" and "</s>".
  std::vector<VocabularyPiece> vocabulary() const override;

  static TokenizerInfo info();
};

}  // namespace loco::data
