// The files of a corpus, in the order `loco prepare` reads them: each input in the order given; a
// directory walked recursively in sorted path order, hidden entries skipped; anything under the
// output directory skipped, so that an earlier run's shards are never read back as text.
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

// DataError for an input that does not exist or is neither a file nor a directory; IoError when a
// directory cannot be listed.
std::vector<CorpusFile> list_corpus_files(const std::vector<fs::path>& inputs, const fs::path& exclude);

}  // namespace loco::data
