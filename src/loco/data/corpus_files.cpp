#include "loco/data/corpus_files.h"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>

#include "loco/data/byte_stream.h"
#include "loco/data/loco_made.h"
#include "loco/data/text.h"
#include "loco/data/utf8_text_check.h"
#include "loco/util/error.h"

namespace loco::data {

namespace {

bool is_hidden(const fs::path& path) { return path.filename().string().rfind('.', 0) == 0; }

// How a .json or .jsonl file begins: its first byte that is neither whitespace nor part of a UTF-8 byte-order
// mark (nullopt for a file with none), and, when that is '{', whether the line ends right after it: a
// pretty-printed object, as every pretty-printer writes one (json.dump(indent=...), jq without -c,
// JSON.stringify(v, null, 2), Go's MarshalIndent). A JSON line cut short is no such object and stays JSON
// Lines, whose reader names the line. DataError when the file is not UTF-8 text (utf8_text_check.h): compressed
// data under a .json name is named as such, not by its first byte.
struct JsonStart {
  std::optional<char> first;
  bool object_over_lines = false;
};

JsonStart json_start(const fs::path& path) {
  ByteStream stream(path);
  std::string start(kBinaryTestBytes, '\0');
  start.resize(stream.read_at_least(start.data(), start.size(), start.size()));
  refuse_what_is_not_utf8_text(path, start);
  std::string_view text = start;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  JsonStart found;
  for (std::string more;;) {
    for (const char c : text) {
      if (!found.first) {
        if (kJsonWhitespace.find(c) != std::string_view::npos) continue;
        found.first = c;
        if (c != '{') return found;
      } else if (c == '\n') {
        found.object_over_lines = true;
        return found;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        return found;
      }
    }
    more.resize(4096);
    more.resize(stream.read(more.data(), more.size()));
    if (more.empty()) return found;
    text = more;
  }
}

CorpusFormat format_of(const fs::path& path) {
  const std::string extension = file_extension(without_compression_extension(path));
  const bool parquet = extension == ".parquet";
  if (parquet || extension == ".arrow" || extension == ".arrows" || extension == ".feather") {
    if (compression_of(path) != Compression::none) {
      throw DataError(
          fmt::format("{} is a compressed {} file: decompress it and give the {} file (loco reads "
                      "these tables at any offset, which a compressed stream does not allow)",
                      path.string(), parquet ? "Parquet" : "Arrow", extension));
    }
    return parquet ? CorpusFormat::parquet : CorpusFormat::arrow;
  }
  if (extension == ".csv") return CorpusFormat::csv;
  if (extension == ".tsv") return CorpusFormat::tsv;
  const bool json_lines = extension == ".jsonl" || extension == ".ndjson";
  if (!json_lines && extension != ".json") return CorpusFormat::text;
  const auto [first, object_over_lines] = json_start(path);
  // A .jsonl file that begins with '[' is an array under the wrong name: no JSON line of a document does; one
  // whose first object spans lines holds pretty-printed objects, as `jq '.[]'` writes them.
  if (first == '[') return CorpusFormat::json_array;
  if (object_over_lines) return CorpusFormat::json_objects;
  if (json_lines || !first || *first == '{') return CorpusFormat::json_lines;
  const std::string shown = shown_byte(*first);
  throw DataError(fmt::format(
      "{} begins with {}, but a .json corpus file is JSON Lines (one object per line, beginning with '{{'), "
      "pretty-printed objects one after another, or one JSON array of objects (beginning with '['), each with a "
      "string \"text\" field (--text-field names another). "
      "Fix the file, or rename it .txt to read it as text",
      path.string(), shown));
}

bool is_table_file(const fs::path& path) {
  const std::string extension = file_extension(path);
  return extension == ".parquet" || extension == ".arrow" || extension == ".arrows" || extension == ".feather";
}

// Why `file`, listed under `dir` with `files`, describes tables rather than holding documents; nullptr when
// it does not:
//   - the files `datasets`' save_to_disk writes beside its .arrow files (state.json, dataset_info.json), or
//     above its splits' directories (dataset_dict.json);
//   - the dataset card (README.md) at the top of a directory of tables, as a Hugging Face dataset repository
//     is downloaded.
const char* why_not_corpus(const fs::path& file, const fs::path& dir, const std::vector<fs::path>& files) {
  const std::string name = file.filename().string();
  const bool beside = name == "state.json" || name == "dataset_info.json";
  if (beside || name == "dataset_dict.json") {
    const bool saved = std::any_of(files.begin(), files.end(), [&](const fs::path& other) {
      return file_extension(other) == ".arrow" && (beside ? other.parent_path() == file.parent_path()
                                                          : other.parent_path().parent_path() == file.parent_path());
    });
    return saved ? "it describes the `datasets` table saved with it (the .arrow files hold its rows)" : nullptr;
  }
  const bool at_top = file.parent_path() == (dir / "x").parent_path();  // "x": whether or not `dir` ends in '/'
  if (name == "README.md" && at_top && std::any_of(files.begin(), files.end(), is_table_file)) {
    return "it is the dataset card of the tables under it (name it in --input to read it as text)";
  }
  return nullptr;
}

// Why an entry of a listed directory that is not a directory is not read; nullptr for a regular file (or a
// link to one), which is.
std::optional<std::string> why_not_read(const fs::directory_entry& entry) {
  std::error_code error;
  const fs::file_status status = entry.status(error);  // through a symbolic link
  if (error) {
    std::error_code unreadable;
    return fmt::format("it is a symbolic link to {} that cannot be followed: {}",
                       fs::read_symlink(entry.path(), unreadable).string(), error.message());
  }
  if (fs::is_regular_file(status)) return std::nullopt;
  if (fs::is_directory(status)) {
    return std::string("it is a symbolic link to a directory, which loco does not follow (links can loop): give "
                       "the directory itself in --input to read it");
  }
  return std::string("it is not a regular file (a FIFO, socket or device: reading one may never end)");
}

// The regular files under `dir`, sorted by path, without hidden entries, anything under `exclude`, any
// directory loco made, what describes tables (why_not_corpus), links that lead nowhere or to directories and
// what is not a file (all added to `skipped`). Symbolic links to files are read; links to directories are not
// followed (they could loop).
std::vector<fs::path> list_directory(const fs::path& dir, const fs::path& exclude, std::vector<SkippedInput>& skipped) {
  std::vector<fs::path> files;
  fs::path excluded = fs::weakly_canonical(exclude);
  if (fs::weakly_canonical(dir) == excluded) return files;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();) {
    const fs::path path = it->path();
    const bool directory = it->is_directory(error) && !it->is_symlink(error);
    const bool hidden = is_hidden(path);
    const char* made = directory && !hidden ? loco_made(path) : nullptr;
    if (hidden) {
      skipped.push_back({path, "its name begins with '.' (name it in --input to read it)", true});
    } else if (made != nullptr) {
      skipped.push_back({path, fmt::format("it is {} (loco's own output is not read as text)", made)});
    } else if (!directory) {
      if (std::optional<std::string> why = why_not_read(*it)) {
        skipped.push_back({path, std::move(*why)});
      } else {
        files.push_back(path);
      }
    }
    const bool enter = directory && !hidden && made == nullptr && fs::weakly_canonical(path) != excluded;
    if (!enter) it.disable_recursion_pending();
    it.increment(error);
    if (error) {
      // Listing the directory just entered failed, or reading the next entry of the one at hand.
      throw IoError(fmt::format("cannot list {}: {}. Check the path and its permissions.",
                                (enter ? path : path.parent_path()).string(), error.message()));
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> corpus;
  for (const fs::path& file : files) {  // `files` whole throughout: each file is judged by all the others
    if (const char* why = why_not_corpus(file, dir, files)) {
      skipped.push_back({file, why});
    } else {
      corpus.push_back(file);
    }
  }
  return corpus;
}

// `paths` without the second and later names of one file (the same file given twice, or reached through a
// link): a file read twice puts its documents into training twice, and into both splits (added to `skipped`).
std::vector<fs::path> without_repeated_files(std::vector<fs::path> paths, std::vector<SkippedInput>& skipped) {
  std::map<std::pair<dev_t, ino_t>, fs::path> first_names;
  std::vector<fs::path> once;
  for (fs::path& path : paths) {
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0) {
      const auto [first, added] = first_names.try_emplace({status.st_dev, status.st_ino}, path);
      if (!added) {
        skipped.push_back({path, fmt::format("it is the same file as {}, which is read once", first->second.string())});
        continue;
      }
    }
    once.push_back(std::move(path));
  }
  return once;
}

}  // namespace

std::vector<CorpusFile> list_corpus_files(const std::vector<fs::path>& inputs, const fs::path& exclude,
                                          std::vector<SkippedInput>* skipped) {
  if (inputs.empty()) throw DataError("no input given; pass text files, directories or JSONL files.");
  std::vector<SkippedInput> not_asked_for;
  std::vector<SkippedInput>& skipped_into = skipped != nullptr ? *skipped : not_asked_for;
  std::vector<fs::path> paths;
  for (const auto& input : inputs) {
    if (const char* made = fs::is_directory(input) ? loco_made(input) : nullptr) {
      const std::string_view kind = made;
      const bool data = kind == kPreparedDataDirectory, unfinished = kind == kInterruptedPreparation;
      throw DataError(fmt::format(
          "input {} is {}, which loco wrote, not a corpus: its files are {}, not text. {}", input.string(), made,
          data || unfinished ? "a tokenizer and token shards" : "a model's weights",
          data         ? fmt::format("Give the text it was prepared from (--tokenizer-from {} reuses its tokenizer).",
                                     input.string())
          : unfinished ? std::string("Give the text it was being prepared from.")
                       : std::string("Give files or directories of text.")));
    }
    if (fs::is_directory(input) && fs::weakly_canonical(input) == fs::weakly_canonical(exclude)) {
      throw DataError(fmt::format("input {} is also the --out directory: give the corpus and the prepared data "
                                  "different directories",
                                  input.string()));
    }
    if (fs::is_directory(input)) {
      try {
        for (auto& file : list_directory(input, exclude, skipped_into)) paths.push_back(std::move(file));
      } catch (const fs::filesystem_error& e) {
        throw IoError(fmt::format("cannot list {}: {}. Check the path and its permissions.", e.path1().string(),
                                  e.code().message()));
      }
    } else if (fs::is_regular_file(input)) {
      paths.push_back(input);
    } else {
      throw DataError(fmt::format("input path {} {}. Pass existing text files, directories of them or JSONL files.",
                                  input.string(),
                                  fs::exists(input) ? "is neither a file nor a directory" : "does not exist"));
    }
  }
  std::vector<CorpusFile> files;
  for (auto& path : without_repeated_files(std::move(paths), skipped_into)) {
    std::error_code error;
    const std::uint64_t bytes = fs::file_size(path, error);
    if (error) throw IoError(fmt::format("cannot read the size of {}: {}.", path.string(), error.message()));
    const CorpusFormat format = format_of(path);
    files.push_back(CorpusFile{std::move(path), format, bytes});
  }
  return files;
}

}  // namespace loco::data
