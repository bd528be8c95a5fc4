// The documents of a corpus: text files (one document each), directories of them (recursively, in
// sorted order, hidden entries skipped) and JSONL files (one document per line's text field, "text"
// unless named otherwise).
//
// Opening a corpus lists and checks every document without keeping its text, so corpora larger
// than memory work: text() reads one document when it is needed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "loco/util/fs.h"

namespace loco::data {

namespace fs = std::filesystem;

// Where one document's text lives.
struct Document {
  std::uint32_t source = 0;      // index into CorpusReader::files()
  std::uint32_t line = 0;        // 1-based line of a JSONL file; 0 for a text file
  std::uint64_t offset = 0;      // byte offset of the JSONL line (0 for a text file)
  std::uint64_t length = 0;      // bytes of the JSONL line or the text file
  std::uint64_t text_bytes = 0;  // bytes of the document's text
};

class CorpusReader {
 public:
  // Lists the documents of `inputs`, skipping anything under `exclude` (the output directory, so
  // that an earlier run's shards are never read back as text). DataError for a missing path, a bad
  // JSONL line (naming file:line) or a corpus without any non-blank document.
  static CorpusReader open(const std::vector<fs::path>& inputs, const fs::path& exclude,
                           const std::string& text_field = "text");

  const std::vector<Document>& documents() const { return documents_; }
  const std::vector<fs::path>& files() const { return files_; }
  std::uint64_t text_bytes() const;

  // The text of one document (IoError if the file changed or vanished since open()).
  std::string text(const Document& document) const;

 private:
  CorpusReader() = default;
  void add_file(const fs::path& path);
  void add_text_file(const fs::path& path, std::uint32_t source);
  void add_jsonl_file(const fs::path& path, std::uint32_t source);

  std::vector<fs::path> files_;
  std::vector<Document> documents_;
  std::string text_field_;  // the JSON field of a JSONL line that holds its document
  // JSONL files stay mapped, by source index: their lines are read one at a time.
  std::unordered_map<std::uint32_t, MappedFile> jsonl_files_;
};

}  // namespace loco::data
