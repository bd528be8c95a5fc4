// Fuzz target: a corpus file as `loco prepare` reads it (data/byte_stream.h, data/corpus_stream.h): the
// first byte picks the file's kind (.jsonl, .jsonl.gz, .jsonl.zst, .txt.gz, .txt.zst, .txt, .json, .json.gz,
// .txt.xz, .jsonl.bz2, .parquet, .arrow, .csv, .tsv.gz), the rest is its content, decompressed, cut into lines
// or array elements and parsed as JSON, or read as Parquet, Arrow IPC or CSV. Corpora come from anywhere: a damaged
// download must end in DataError naming the file, never in a crash or an endless loop.
#include <array>
#include <string>

#include "fuzz/fuzz_support.h"
#include "loco/data/corpus_files.h"
#include "loco/data/corpus_stream.h"
#include "loco/data/text.h"
#include "loco/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using loco::fuzz::fuzz_require;
  static const std::array<const char*, 14> kNames{
      "fuzz.jsonl",   "fuzz.jsonl.gz", "fuzz.jsonl.zst", "fuzz.txt.gz",  "fuzz.txt.zst", "fuzz.txt", "fuzz.json",
      "fuzz.json.gz", "fuzz.txt.xz",   "fuzz.jsonl.bz2", "fuzz.parquet", "fuzz.arrow",   "fuzz.csv", "fuzz.tsv.gz"};
  if (size == 0) return 0;
  const std::string name = kNames[data[0] % kNames.size()];
  const auto path = loco::fuzz::write_scratch_file(name, loco::fuzz::as_text(data + 1, size - 1));
  try {
    const std::vector<loco::data::CorpusFile> files =
        loco::data::list_corpus_files({path}, loco::fuzz::scratch_dir() / "out");
    fuzz_require(files.size() == 1, "one input file is one corpus file");
    loco::data::CorpusStream stream(files, "text", /*utf8_only=*/true);
    std::uint64_t last_line = 0;
    for (loco::data::RawDocument document; stream.next(document);) {
      fuzz_require(!loco::data::is_blank(document.bytes), "blank lines and files are skipped");
      if (files[0].format != loco::data::CorpusFormat::text) {
        fuzz_require(document.line > last_line, "JSON line, element and table row numbers increase");
        last_line = document.line;
      } else {
        fuzz_require(document.line == 0, "a text file is one document, line 0");
      }
      try {
        loco::data::document_text(std::move(document), files, "text");
      } catch (const loco::DataError&) {  // a line that is not an object with a string "text"
      }
    }
    fuzz_require(stream.file_bytes_read() == files[0].bytes, "the whole file was read");
  } catch (const loco::DataError&) {  // damaged, truncated or empty compressed data
  } catch (const loco::IoError&) {
  }
  return 0;
}
