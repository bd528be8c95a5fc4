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

// How a corpus file holds its documents. By the name without its compression extension and the first byte of
// its content (after a byte-order mark and whitespace): a .json, .jsonl or .ndjson file that begins with '[' is a
// JSON array; one whose first line is a lone '{' holds pretty-printed objects (note "json-objects"); a .json
// file that begins with '{' otherwise (`datasets`' to_json and C4's files write JSON Lines as .json), and any
// other .jsonl or .ndjson file, is JSON Lines; a .csv file is comma-separated and a .tsv file tab-separated
// values; a .parquet file is Parquet; a .arrow, .arrows or .feather file is Arrow IPC; any other name is text.
enum class CorpusFormat {
  text,          // the file is one document (or parts of a long one: corpus_stream.h)
  json_lines,    // one JSON object per line, its text field a document
  json_array,    // one JSON array of objects, each element's text field a document
  json_objects,  // JSON objects one after another, each over lines (pretty-printed), each text field a document
  parquet,       // a Parquet file (.parquet), each row's text column a document (parquet_text.h)
  arrow,         // an Arrow IPC file (.arrow, .arrows, .feather), each row's text column a document (arrow_text.h)
  csv,           // comma-separated values (.csv), each row's text column a document (csv_text.h)
  tsv,           // tab-separated values (.tsv), as csv
};

struct CorpusFile {
  fs::path path;
  CorpusFormat format = CorpusFormat::text;
  std::uint64_t bytes = 0;  // size of the file on disk (compressed size for .gz/.zst)
};

// The files of one format hold their documents as JSON records (lines, array elements or pretty-printed objects).
inline bool holds_json_records(const CorpusFile& file) {
  return file.format == CorpusFormat::json_lines || file.format == CorpusFormat::json_array ||
         file.format == CorpusFormat::json_objects;
}

// What the inputs hold but is not read: under a listed directory, a hidden entry, a directory loco made as its
// own output (loco_made.h), whose shards or weights are never read as text, the description files (state.json,
// dataset_info.json, dataset_dict.json) that `datasets`' save_to_disk writes beside its .arrow files, the dataset
// card (README.md) at the top of a directory of Parquet or Arrow files (a Hugging Face dataset repository), a
// symbolic link that leads nowhere or to a directory, what is not a regular file (a FIFO); and a file named twice
// (given twice, or reached again through a link), whose second name is not read.
struct SkippedInput {
  fs::path path;
  std::string reason;   // why, as "it is ..."
  bool hidden = false;  // its name begins with '.' (said together, not one line each: a corpus may hold many)
};

// DataError for an input that does not exist, is neither a file nor a directory, is itself a directory loco
// made or the excluded directory, or is a .json file that begins with neither '{' nor '['; IoError when a
// directory cannot be listed. What the inputs hold but is not corpus (SkippedInput) is added to `skipped` when
// given.
std::vector<CorpusFile> list_corpus_files(const std::vector<fs::path>& inputs, const fs::path& exclude,
                                          std::vector<SkippedInput>* skipped = nullptr);

}  // namespace loco::data
