// loco_sentencepiece.so: libsentencepiece behind the interface of loco/data/sentencepiece_library.h,
// loaded at run time with its own symbol scope (note "sentencepiece-plugin" there explains why).
// Nothing here may throw into loco: sentencepiece's statuses become error strings.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <string>

#include "loco/data/sentencepiece_library.h"

// Exported by libsentencepiece but missing from its public headers.
namespace sentencepiece::logging {
void SetMinLogLevel(int level);
}

namespace {

// Above FATAL (3): sentencepiece logs nothing, so it never touches std::cerr. That matters beyond
// quiet output: under RTLD_DEEPBIND sentencepiece binds to libstdc++'s own std::cerr, which is
// never constructed when the executable holds a copy of it, and writing to it crashes.
constexpr int kLogNothing = 4;

using loco::data::spm::LineSource;

class LoadedModel final : public loco::data::spm::Model {
 public:
  bool load(const std::string& serialized, std::string* error) {
    auto status = processor_.LoadFromSerializedProto(serialized);
    if (!status.ok()) *error = status.ToString();
    return status.ok();
  }
  // Encoding and decoding fail only without a model, which load() rules out.
  std::vector<int> encode(std::string_view text) const override {
    std::vector<int> ids;
    processor_.Encode(text, &ids).IgnoreError();
    return ids;
  }
  std::string decode(const std::vector<int>& ids) const override {
    std::string text;
    processor_.Decode(ids, &text).IgnoreError();
    return text;
  }
  int piece_count() const override { return processor_.GetPieceSize(); }
  int bos_id() const override { return processor_.bos_id(); }
  int eos_id() const override { return processor_.eos_id(); }
  loco::data::VocabularyPiece piece(int id) const override {
    using Type = loco::data::VocabularyPiece::Type;
    Type type = processor_.IsUnknown(id)   ? Type::unknown
                : processor_.IsControl(id) ? Type::control
                : processor_.IsByte(id)    ? Type::byte
                : processor_.IsUnused(id)  ? Type::unused
                                           : Type::normal;
    return {processor_.IdToPiece(id), processor_.GetScore(id), type};
  }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

class Lines final : public sentencepiece::SentenceIterator {
 public:
  explicit Lines(LineSource& source) : source_(source) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !source_.next(line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  LineSource& source_;
  std::string line_;
  bool done_ = false;
};

class Library final : public loco::data::spm::Library {
 public:
  std::unique_ptr<loco::data::spm::Model> load(const std::string& serialized, std::string* error) const override {
    auto model = std::make_unique<LoadedModel>();
    if (!model->load(serialized, error)) return nullptr;
    return model;
  }
  bool train(const std::string& flags, LineSource& source, std::string* serialized_model,
             std::string* error) const override {
    Lines lines(source);
    // Training would set the log level from its flags: keep it at kLogNothing.
    std::string quiet_flags = flags + " --minloglevel=" + std::to_string(kLogNothing);
    auto status = sentencepiece::SentencePieceTrainer::Train(quiet_flags, &lines, serialized_model);
    if (!status.ok()) *error = status.error_message();
    return status.ok();
  }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const loco::data::spm::Library* loco_sentencepiece_library_v2() {
  sentencepiece::logging::SetMinLogLevel(kLogNothing);
  static const Library library;
  return &library;
}
