// The files of a corpus, in the order `loco prepare` reads them: each input in the order given; a
// directory walked recursively in sorted path order, hidden entries skipped; anything under the
// output directory, and any prepared data directory or checkpoint, skipped, so that shards and weights are
// never read as text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace loco::data {

namespace fs = std::filesystem;

struct CorpusFile {
  fs::path path;
  bool jsonl = false;      // one document per line (.jsonl, .jsonl.gz, .jsonl.zst); else one document per file
  std::uint64_t bytes = 0;  // size of the file on disk (compressed size for .gz/.zst)
};

// A directory under an input that loco made as its own output (loco_made.h): skipped, its shards or weights
// never read as text.
struct SkippedDirectory {
  fs::path path;
  const char* kind;  // what loco made it as
};

// DataError for an input that does not exist, is neither a file nor a directory, or is itself a directory loco
// made; IoError when a directory cannot be listed. The directories loco made under an input are added to
// `skipped` when given.
std::vector<CorpusFile> list_corpus_files(const std::vector<fs::path>& inputs, const fs::path& exclude,
                                          std::vector<SkippedDirectory>* skipped = nullptr);

}  // namespace loco::data
