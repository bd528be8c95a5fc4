#include "loco/data/corpus_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "loco/data/text.h"
#include "loco/util/error.h"

namespace loco::data {

namespace {

bool is_hidden(const fs::path& path) { return path.filename().string().rfind('.', 0) == 0; }

bool is_jsonl(const fs::path& path) { return path.extension() == ".jsonl"; }

std::string_view bytes_of(const MappedFile& file) { return {reinterpret_cast<const char*>(file.data()), file.size()}; }

// The text field (`field`) of one JSONL line (`number` is 1-based, for the message).
std::string jsonl_text(std::string_view line, const std::string& field, const fs::path& file, std::uint64_t number) {
  // Formatted only on a bad line: this runs for every line of the corpus.
  const auto fix = [&] {
    return fmt::format(
        "Each line of a .jsonl file must be a JSON object with a string \"{}\" field; fix or remove that line "
        "(blank lines are allowed), or name the field that holds the text with --text-field.",
        field);
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}:{}: not valid JSON ({}). {}", file.string(), number, e.what(), fix()));
  }
  auto text = j.is_object() ? j.find(field) : j.end();
  if (!j.is_object() || text == j.end() || !text->is_string()) {
    throw DataError(fmt::format("{}:{}: no string \"{}\" field. {}", file.string(), number, field, fix()));
  }
  return text->get<std::string>();
}

// The regular files under `dir`, sorted by path, without hidden entries or anything under `exclude`.
// Symbolic links to files are read; links to directories are not followed (they could loop).
std::vector<fs::path> list_directory(const fs::path& dir, const fs::path& exclude) {
  std::vector<fs::path> files;
  fs::path excluded = fs::weakly_canonical(exclude);
  if (fs::weakly_canonical(dir) == excluded) return files;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    bool skip = is_hidden(it->path()) || (it->is_directory() && fs::weakly_canonical(it->path()) == excluded);
    if (skip) {
      it.disable_recursion_pending();
    } else if (it->is_regular_file()) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string describe_inputs(const std::vector<fs::path>& inputs) {
  std::string out;
  for (const auto& input : inputs) out += (out.empty() ? "" : ", ") + input.string();
  return out;
}

}  // namespace

CorpusReader CorpusReader::open(const std::vector<fs::path>& inputs, const fs::path& exclude,
                                const std::string& text_field) {
  if (inputs.empty()) throw DataError("no input given; pass text files, directories or JSONL files.");
  CorpusReader corpus;
  corpus.text_field_ = text_field;
  for (const auto& input : inputs) {
    if (fs::is_directory(input)) {
      std::vector<fs::path> files;
      try {
        files = list_directory(input, exclude);
      } catch (const fs::filesystem_error& e) {
        throw IoError(fmt::format("cannot list {}: {}. Check the path and its permissions.", e.path1().string(),
                                  e.code().message()));
      }
      for (const auto& file : files) corpus.add_file(file);
    } else if (fs::is_regular_file(input)) {
      corpus.add_file(input);
    } else {
      throw DataError(fmt::format("input path {} {}. Pass existing text files, directories of them or JSONL files.",
                                  input.string(),
                                  fs::exists(input) ? "is neither a file nor a directory" : "does not exist"));
    }
  }
  if (corpus.documents_.empty()) {
    throw DataError(
        fmt::format("no text found in {}; pass files or directories that contain text.", describe_inputs(inputs)));
  }
  return corpus;
}

void CorpusReader::add_file(const fs::path& path) {
  auto source = static_cast<std::uint32_t>(files_.size());
  files_.push_back(path);
  if (is_jsonl(path)) {
    add_jsonl_file(path, source);
  } else {
    add_text_file(path, source);
  }
}

void CorpusReader::add_text_file(const fs::path& path, std::uint32_t source) {
  MappedFile file(path);
  if (is_blank(bytes_of(file))) return;
  documents_.push_back(Document{source, 0, 0, file.size(), file.size()});
}

void CorpusReader::add_jsonl_file(const fs::path& path, std::uint32_t source) {
  MappedFile file(path);
  std::string_view bytes = bytes_of(file);
  std::uint32_t number = 0;
  for (std::size_t begin = 0; begin < bytes.size();) {
    std::size_t end = std::min(bytes.find('\n', begin), bytes.size());
    std::string_view line = bytes.substr(begin, end - begin);
    ++number;
    if (!is_blank(line)) {
      std::string text = jsonl_text(line, text_field_, path, number);
      if (!is_blank(text)) documents_.push_back(Document{source, number, begin, line.size(), text.size()});
    }
    begin = end + 1;
  }
  jsonl_files_.emplace(source, std::move(file));
}

std::uint64_t CorpusReader::text_bytes() const {
  std::uint64_t total = 0;
  for (const auto& document : documents_) total += document.text_bytes;
  return total;
}

std::string CorpusReader::text(const Document& document) const {
  const fs::path& path = files_.at(document.source);
  if (document.line == 0) return read_file(path);
  std::string_view bytes = bytes_of(jsonl_files_.at(document.source));
  return jsonl_text(bytes.substr(document.offset, document.length), text_field_, path, document.line);
}

}  // namespace loco::data
