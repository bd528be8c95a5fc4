#include "loco/data/sentencepiece_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <regex>
#include <thread>

#include "loco/data/text.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco::data {

namespace {

constexpr const char* kModelFileName = "tokenizer.model";

// sentencepiece skips longer training lines; longer lines are cut into pieces of at most this size.
constexpr std::size_t kMaxSentenceBytes = 8192;

// Where to cut text[begin, end) so that the piece has at most kMaxSentenceBytes: at the last space
// (the next piece then starts with it, as a word does), else on a UTF-8 character boundary.
std::size_t cut_position(const std::string& text, std::size_t begin, std::size_t end) {
  if (end - begin <= kMaxSentenceBytes) return end;
  std::size_t limit = begin + kMaxSentenceBytes;
  std::size_t space = text.rfind(' ', limit);
  if (space != std::string::npos && space > begin) return space;
  while (limit > begin + 1 && (static_cast<unsigned char>(text[limit]) & 0xC0) == 0x80) --limit;
  return limit;
}

// Feeds sentencepiece the non-blank lines of the documents, at most kMaxTrainingLines of them.
// An exception from the document source is kept and rethrown after training, never thrown through
// sentencepiece.
class TrainingLines final : public spm::LineSource {
 public:
  explicit TrainingLines(const DocumentSource& next_document) : next_document_(next_document) {}

  bool next(std::string& line) override {
    try {
      return advance(line);
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }
  void rethrow_error() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  bool advance(std::string& line) {
    while (lines_ < kMaxTrainingLines) {
      if (position_ >= text_.size()) {
        if (!next_document_(text_)) return false;
        position_ = 0;
        continue;
      }
      std::size_t newline = std::min(text_.find('\n', position_), text_.size());
      std::size_t end = cut_position(text_, position_, newline);
      line.assign(text_, position_, end - position_);
      position_ = end == newline ? end + 1 : end;
      if (!is_blank(line)) {
        ++lines_;
        return true;
      }
    }
    return false;
  }

  const DocumentSource& next_document_;
  std::string text_;
  std::size_t position_ = 0;
  std::uint64_t lines_ = 0;
  std::exception_ptr error_;
};

DataError training_error(std::string message, std::uint32_t vocab_size) {
  // sentencepiece names the limit it hit in its message; turn the two common ones into the fix.
  static const std::regex too_high("value <= ([0-9]+)");
  static const std::regex too_low("required_chars\\. [0-9]+ vs ([0-9]+)");
  std::smatch limit;
  if (std::regex_search(message, limit, too_high)) {
    return DataError(
        fmt::format("the tokenizer's sample of the corpus is too small for a BPE vocabulary of {} tokens: it "
                    "supports at most {}. Pass --vocab-size {} or less, a larger --tokenizer-sample-mb (where the "
                    "corpus holds more text than the sample), add more text, or use --tokenizer byte.",
                    vocab_size, limit[1].str(), limit[1].str()));
  }
  if (std::regex_search(message, limit, too_low)) {
    return DataError(
        fmt::format("a BPE vocabulary of {} tokens is too small for this corpus: the 256 byte tokens, 3 special "
                    "tokens and the corpus's characters alone need {}. Pass a --vocab-size well above {} (the "
                    "default is 8192) or use --tokenizer byte.",
                    vocab_size, limit[1].str(), limit[1].str()));
  }
  while (!message.empty() && message.back() == '.') message.pop_back();
  return DataError(
      fmt::format("sentencepiece could not train a BPE vocabulary of {} tokens: {}. Choose another "
                  "--vocab-size or use --tokenizer byte.",
                  vocab_size, message));
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const fs::path& dir, const TokenizerInfo& info) : info_(info) {
  fs::path model_path = dir / info.model_file;
  if (!fs::is_regular_file(model_path)) {
    throw DataError(
        fmt::format("{} names the sentencepiece model {}, which does not exist. Copy the whole tokenizer "
                    "directory (tokenizer.json and {}) or run `loco prepare` again.",
                    (dir / kTokenizerFileName).string(), model_path.string(), info.model_file));
  }
  // The library's own status names its source lines and protobuf calls, which mean nothing to a user: the
  // file is damaged or not a model, and that is what is said.
  std::string library_status;
  model_ = sentencepiece_library().load(read_file(model_path), &library_status);
  if (model_ == nullptr) {
    throw DataError(fmt::format("{} is not a valid sentencepiece model: its bytes do not read as one (the file is "
                                "damaged, cut short or another file). Run `loco prepare` again, or copy the tokenizer "
                                "files again from where they were made.",
                                model_path.string()));
  }
  auto pieces = static_cast<std::uint32_t>(model_->piece_count());
  if (pieces != info.vocab_size || model_->bos_id() != static_cast<int>(info.bos_id) ||
      model_->eos_id() != static_cast<int>(info.eos_id)) {
    throw DataError(
        fmt::format("{} (vocab {}, bos {}, eos {}) does not match {} (vocab {}, bos {}, eos {}): the two files "
                    "come from different runs. Copy both from the same prepared data directory.",
                    model_path.string(), pieces, model_->bos_id(), model_->eos_id(),
                    (dir / kTokenizerFileName).string(), info.vocab_size, info.bos_id, info.eos_id));
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<std::uint32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids = model_->encode(text);
  return std::vector<std::uint32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  std::vector<int> pieces;
  pieces.reserve(ids.size());
  for (std::uint32_t id : ids) {
    LOCO_CHECK(id < info_.vocab_size, "token id {} outside the vocabulary of {}", id, info_.vocab_size);
    if (id != info_.bos_id && id != info_.eos_id) pieces.push_back(static_cast<int>(id));
  }
  return model_->decode(pieces);
}

std::vector<VocabularyPiece> SentencePieceTokenizer::vocabulary() const {
  std::vector<VocabularyPiece> pieces;
  pieces.reserve(info_.vocab_size);
  for (std::uint32_t id = 0; id < info_.vocab_size; ++id) pieces.push_back(model_->piece(static_cast<int>(id)));
  return pieces;
}

TokenizerInfo train_sentencepiece_bpe(const DocumentSource& next_document, std::uint32_t vocab_size,
                                      const fs::path& dir) {
  // See note "sentencepiece-settings" in the header. Documents arrive in random order, so the
  // first kMaxTrainingLines lines are a random sample and sentencepiece need not sample again.
  std::string flags = fmt::format(
      "--model_type=bpe --vocab_size={} --byte_fallback=true --normalization_rule_name=identity "
      "--remove_extra_whitespaces=false --add_dummy_prefix=false --unk_id=0 --bos_id=1 --eos_id=2 "
      "--pad_id=-1 --max_sentence_length={} --input_sentence_size=0 --shuffle_input_sentence=false "
      "--num_threads={}",
      vocab_size, kMaxSentenceBytes, std::max(1u, std::thread::hardware_concurrency()));
  TrainingLines lines(next_document);
  std::string model;
  std::string error;
  bool trained = sentencepiece_library().train(flags, lines, &model, &error);
  lines.rethrow_error();
  if (!trained) throw training_error(error, vocab_size);

  write_file_atomic(dir / kModelFileName, model);
  TokenizerInfo info{kSentencePieceKind, vocab_size, 1, 2, kModelFileName};
  write_tokenizer_info(dir, info);
  return info;
}

}  // namespace loco::data
