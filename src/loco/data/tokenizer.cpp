#include "loco/data/tokenizer.h"

#include <fmt/format.h>

#include "loco/data/json_file.h"
#include "loco/data/sentencepiece_tokenizer.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/json_integer.h"

namespace loco::data {

namespace {

constexpr const char* kTokenizerFix =
    "Point to a directory written by `loco prepare` (or a checkpoint), or run `loco prepare` again.";

}  // namespace

nlohmann::json TokenizerInfo::to_json() const {
  nlohmann::json j{{"kind", kind}, {"vocab_size", vocab_size}, {"bos_id", bos_id}, {"eos_id", eos_id}};
  if (!model_file.empty()) j["model_file"] = model_file;
  return j;
}

void write_tokenizer_info(const fs::path& dir, const TokenizerInfo& info) {
  write_file_atomic(dir / kTokenizerFileName, info.to_json().dump(2) + "\n");
}

TokenizerInfo read_tokenizer_info(const fs::path& dir) {
  fs::path path = dir / kTokenizerFileName;
  nlohmann::json j = read_json_file(path, kTokenizerFix);
  // A Hugging Face tokenizer (what `loco export` writes beside its weights) is said as such: it was "malformed (key
  // 'kind' not found)", of a file loco wrote itself.
  if (j.is_object() && j.contains("model") && j.contains("version") && !j.contains("kind")) {
    throw DataError(
        fmt::format("{} is a Hugging Face tokenizer (as `loco export` writes), not one of a prepared data "
                    "directory or checkpoint: give the checkpoint the export was made from, or a "
                    "directory of `loco prepare`",
                    path.string()));
  }
  TokenizerInfo info = read_json_fields(path, kTokenizerFix, [&] {
    // json_integer refuses what get<std::uint32_t> would wrap (10^12, -1) or truncate (2.5).
    return TokenizerInfo{j.at("kind").get<std::string>(), json_integer<std::uint32_t>(j.at("vocab_size")),
                         json_integer<std::uint32_t>(j.at("bos_id")), json_integer<std::uint32_t>(j.at("eos_id")),
                         j.value("model_file", std::string())};
  });
  if (info.kind != "byte" && info.kind != kSentencePieceKind) {
    throw malformed_json_file(path, fmt::format("unknown tokenizer kind '{}'", info.kind), kTokenizerFix);
  }
  // The model file is copied next to tokenizer.json: it must be a plain name, never a path.
  bool needs_model = info.kind == kSentencePieceKind;
  if (needs_model != !info.model_file.empty() || info.model_file.find('/') != std::string::npos ||
      info.model_file == "..") {
    throw malformed_json_file(path, fmt::format("bad model_file '{}'", info.model_file), kTokenizerFix);
  }
  return info;
}

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& dir) {
  TokenizerInfo info = read_tokenizer_info(dir);
  if (info.kind == kSentencePieceKind) return std::make_unique<SentencePieceTokenizer>(dir, info);
  TokenizerInfo expected = ByteTokenizer::info();
  if (info.vocab_size != expected.vocab_size || info.bos_id != expected.bos_id || info.eos_id != expected.eos_id) {
    throw malformed_json_file(dir / kTokenizerFileName,
                              fmt::format("a byte tokenizer has vocab_size {}, bos_id {}, eos_id {}",
                                          expected.vocab_size, expected.bos_id, expected.eos_id),
                              kTokenizerFix);
  }
  return std::make_unique<ByteTokenizer>();
}

std::vector<std::string> tokenizer_file_names(const fs::path& dir) {
  TokenizerInfo info = read_tokenizer_info(dir);
  std::vector<std::string> names{kTokenizerFileName};
  if (!info.model_file.empty()) names.push_back(info.model_file);
  return names;
}

std::string tokenizer_hash(const fs::path& dir) {
  TokenizerInfo info = read_tokenizer_info(dir);
  if (info.model_file.empty()) return info.kind;
  return fmt::format("{} crc32:{}", info.kind, crc32_hex_of_file(dir / info.model_file));
}

void copy_tokenizer_files(const fs::path& from_dir, const fs::path& to_dir) {
  std::vector<std::string> names = tokenizer_file_names(from_dir);
  // tokenizer.json last: a reader that finds it also finds the model it names.
  for (auto name = names.rbegin(); name != names.rend(); ++name) {
    write_file_atomic(to_dir / *name, read_file(from_dir / *name));
  }
}

void Tokenizer::encode_into(std::string_view text, std::vector<std::uint32_t>& ids) const {
  const std::vector<std::uint32_t> encoded = encode(text);
  ids.reserve(ids.size() + encoded.size() + 1);
  ids.insert(ids.end(), encoded.begin(), encoded.end());
}

std::vector<std::uint32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<std::uint32_t> ids;
  encode_into(text, ids);
  return ids;
}

void ByteTokenizer::encode_into(std::string_view text, std::vector<std::uint32_t>& ids) const {
  ids.reserve(ids.size() + text.size() + 1);
  for (const char byte : text) ids.push_back(static_cast<unsigned char>(byte));
}

std::vector<VocabularyPiece> ByteTokenizer::vocabulary() const {
  std::vector<VocabularyPiece> pieces;
  pieces.reserve(kVocabSize);
  for (int byte = 0; byte < 256; ++byte) {
    pieces.push_back({fmt::format("<0x{:02X}>", byte), 0, VocabularyPiece::Type::byte});
  }
  pieces.push_back({"<s>", 0, VocabularyPiece::Type::control});
  pieces.push_back({"</s>", 0, VocabularyPiece::Type::control});
  return pieces;
}

std::string ByteTokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (std::uint32_t id : ids) {
    LOCO_CHECK(id < kVocabSize, "token id {} outside the byte vocabulary of {}", id, kVocabSize);
    if (id < kBos) text.push_back(static_cast<char>(id));
  }
  return text;
}

TokenizerInfo ByteTokenizer::info() { return TokenizerInfo{"byte", kVocabSize, kBos, kEos, ""}; }

}  // namespace loco::data
