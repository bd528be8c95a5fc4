// The sentencepiece plugin: loco reaches libsentencepiece only through this interface.
//
// Note "sentencepiece-plugin": Debian's libsentencepiece bundles protobuf-lite 3.14 and exports its
// symbols; libtorch loads the system libprotobuf 3.21. With both in the program's global symbol
// scope, the dynamic linker binds one library's protobuf calls to the other's copy: the program
// crashes while loading (libprotobuf's static initializers), or with protobuf first, sentencepiece
// aborts on a version check. So libsentencepiece is never linked into loco: the small plugin
// loco_sentencepiece.so links it, and sentencepiece_library() loads that plugin with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND), which keeps sentencepiece's protobuf private to it. Only
// virtual calls cross the boundary, no exceptions: errors come back as strings. The plugin also
// turns sentencepiece's logging off entirely, because under RTLD_DEEPBIND its std::cerr is not the
// program's (see the plugin).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loco/data/vocabulary_piece.h"

namespace loco::data::spm {

// Training text, one line per call; returns false at the end.
class LineSource {
 public:
  virtual ~LineSource() = default;
  virtual bool next(std::string& line) = 0;
};

// A loaded sentencepiece model.
class Model {
 public:
  virtual ~Model() = default;
  virtual std::vector<int> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  virtual int piece_count() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  virtual VocabularyPiece piece(int id) const = 0;  // id in [0, piece_count())
};

class Library {
 public:
  // A model from the bytes of a .model file; nullptr with `error` set when they are not one.
  virtual std::unique_ptr<Model> load(const std::string& serialized, std::string* error) const = 0;
  // Trains with sentencepiece's command-line `flags` on `lines` (keeping sentencepiece's log
  // quiet); false with `error` set on failure.
  virtual bool train(const std::string& flags, LineSource& lines, std::string* serialized_model,
                     std::string* error) const = 0;

 protected:
  ~Library() = default;
};

// The symbol the plugin exports; the suffix changes whenever the interface above does.
inline constexpr const char* kPluginEntryPoint = "loco_sentencepiece_library_v2";

}  // namespace loco::data::spm

namespace loco::data {

// Loads the plugin on first use. Looked for, in order: $LOCO_SENTENCEPIECE_PLUGIN, next to the
// running executable, and where the build put it. DataError with the fix when it cannot be loaded.
const spm::Library& sentencepiece_library();

}  // namespace loco::data
