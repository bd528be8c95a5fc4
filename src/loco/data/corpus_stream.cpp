#include "loco/data/corpus_stream.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "loco/data/arrow_text.h"
#include "loco/data/csv_text.h"
#include "loco/data/parquet_text.h"
#include "loco/data/text.h"
#include "loco/data/utf8_text_check.h"
#include "loco/util/error.h"
#include "loco/util/json_nesting.h"
#include "loco/util/python_json.h"
#include "loco/util/utf8.h"

namespace loco::data {

namespace {

// Read size; the buffer doubles for a longer line. Small enough that opening a stream costs nothing
// (the fuzzer opens one per input), large enough that reads are few.
constexpr std::size_t kReadBuffer = 256 << 10;
// A JSONL line is held whole while it is read: one document, which no corpus makes this long.
constexpr std::size_t kLongestJsonlLine = std::size_t{256} << 20;

// Where the text part `part` ends within the next `count` bytes `next` (note "text-parts"): the number of them
// it takes, or npos when it takes them all and goes on.
std::size_t text_part_end(const std::string& part, const char* next, std::size_t count) {
  const std::size_t paragraph = kTextPartBytes, line = 2 * kTextPartBytes, hard = 4 * kTextPartBytes;
  const std::size_t held = part.size();
  // The part's last two bytes (0 where it has fewer), for a blank line that began before `next`.
  std::array<char, 2> last{held >= 2 ? part[held - 2] : '\0', held >= 1 ? part[held - 1] : '\0'};
  if (held + count < paragraph) return std::string::npos;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t size = held + i + 1;  // of the part ending with next[i]
    const char c = next[i];
    if (c == '\n' && size >= paragraph) {
      // The line that ends here is blank: "\n\n" or "\n\r\n".
      const bool blank = last[1] == '\n' || (last[1] == '\r' && last[0] == '\n');
      if (blank || size >= line) return i + 1;
    }
    // c begins a character (or the bytes are not UTF-8: no character has more than 3 continuation bytes).
    if (size > hard && ((static_cast<unsigned char>(c) & 0xC0) != 0x80 || size > hard + 3)) return i;
    last = {last[1], c};
  }
  return std::string::npos;
}

// The reader of a table file's text column `column`; nullptr for a file read as a stream of bytes.
std::unique_ptr<ColumnTextReader> open_table(const CorpusFile& file, const std::string& column, bool utf8_only) {
  switch (file.format) {
    case CorpusFormat::parquet:
      return open_parquet_text(file.path, column);
    case CorpusFormat::arrow:
      return open_arrow_text(file.path, column);
    case CorpusFormat::csv:
      return open_csv_text(file.path, column, ',', utf8_only);
    case CorpusFormat::tsv:
      return open_csv_text(file.path, column, '\t', utf8_only);
    default:
      return nullptr;
  }
}

}  // namespace

CorpusStream::CorpusStream(const std::vector<CorpusFile>& files, std::string text_field, bool utf8_only)
    : files_(files), text_field_(std::move(text_field)), utf8_only_(utf8_only), buffer_(kReadBuffer) {}

CorpusStream::~CorpusStream() = default;

std::uint64_t CorpusStream::file_bytes_read() const {
  return finished_file_bytes_ + (stream_ ? stream_->file_bytes_read() : 0) + (table_ ? table_->file_bytes_read() : 0);
}

bool CorpusStream::open_next_file() {
  if (next_file_ == files_.size()) return false;
  const CorpusFile& file = files_[next_file_++];
  const fs::path& path = file.path;
  table_ = open_table(file, text_field_, utf8_only_);
  if (table_) return true;
  stream_ = std::make_unique<ByteStream>(path);
  begin_ = 0;
  end_ = stream_->read_at_least(buffer_.data(), buffer_.size(), kBinaryTestBytes);
  end_of_file_ = end_ == 0;
  line_ = 0;
  array_opened_ = array_closed_ = false;
  refuse_what_is_not_utf8_text(path, std::string_view(buffer_.data(), end_));
  // Fewer bytes than were asked for: the file ended (read_at_least), and no character is cut at their end.
  if (utf8_only_)
    refuse_bytes_that_are_not_utf8(path, std::string_view(buffer_.data(), end_), end_ >= kBinaryTestBytes);
  skip_byte_order_mark();
  text_offset_ = begin_;
  return true;
}

// The start of each file was checked as it opened; the rest of a text or table file is checked here, document by
// document (a JSON record's parser refuses bytes that are not UTF-8 itself).
void CorpusStream::refuse_stray_bytes_of(const CorpusFile& file, std::string_view bytes, std::uint64_t position,
                                         std::uint64_t offset) const {
  if (holds_json_records(file)) return;
  refuse_stray_bytes(file.path, bytes, [&](std::size_t at) {
    return table_ ? fmt::format("offset {} of row {}'s text", at, position) : fmt::format("offset {}", offset + at);
  });
}

// A UTF-8 byte-order mark (Windows tools begin files with one) is no part of the text: a file of the mark alone
// is empty, a text's first document does not begin with U+FEFF, a JSON Lines file's first line is what follows
// it (a blank one, then, is allowed) and an array's '[' is found after it.
void CorpusStream::skip_byte_order_mark() {
  constexpr std::string_view kMark = "\xEF\xBB\xBF";
  while (end_ < kMark.size() && !end_of_file_) {
    const std::size_t got = stream_->read(buffer_.data() + end_, buffer_.size() - end_);
    end_ += got;
    end_of_file_ = got == 0;
  }
  if (std::string_view(buffer_.data(), end_).substr(0, kMark.size()) == kMark) begin_ = kMark.size();
}

void CorpusStream::close_file() {
  finished_file_bytes_ = file_bytes_read();  // the files before and this one
  stream_.reset();
  table_.reset();
}

bool CorpusStream::next_line(std::string& line) {
  for (;;) {
    const char* start = buffer_.data() + begin_;
    if (const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_))) {
      line.assign(start, newline);
      begin_ += static_cast<std::size_t>(newline - start) + 1;
      ++line_;
      return true;
    }
    if (end_of_file_) {
      if (begin_ == end_) return false;
      line.assign(start, end_ - begin_);  // a last line without a newline
      begin_ = end_;
      ++line_;
      return true;
    }
    std::memmove(buffer_.data(), start, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    if (end_ == buffer_.size()) {
      if (buffer_.size() >= kLongestJsonlLine) {
        throw DataError(fmt::format("{}:{}: a line longer than {} MiB, more than any document loco reads (a file that is "
                                    "not JSONL, or lost its line ends?). Split it into lines of one document each, or "
                                    "name it .txt to read it as text",
                                    files_[next_file_ - 1].path.string(), line_ + 1, kLongestJsonlLine >> 20));
      }
      buffer_.resize(buffer_.size() * 2);
    }
    std::size_t got = stream_->read(buffer_.data() + end_, buffer_.size() - end_);
    end_ += got;
    end_of_file_ = got == 0;
  }
}

bool CorpusStream::next_text_part(std::string& part) {
  part.clear();
  for (;;) {
    const char* next = buffer_.data() + begin_;
    const std::size_t count = end_ - begin_;
    if (const std::size_t taken = text_part_end(part, next, count); taken != std::string::npos) {
      part.append(next, taken);
      begin_ += taken;
      return true;
    }
    part.append(next, count);
    begin_ = end_ = 0;
    if (end_of_file_) return !part.empty();
    end_ = stream_->read(buffer_.data(), buffer_.size());
    end_of_file_ = end_ == 0;
  }
}

bool CorpusStream::peek_byte(char& c) {
  if (begin_ == end_) {
    if (end_of_file_) return false;
    begin_ = 0;
    end_ = stream_->read(buffer_.data(), buffer_.size());
    end_of_file_ = end_ == 0;
    if (end_of_file_) return false;
  }
  c = buffer_[begin_];
  return true;
}

bool CorpusStream::next_byte(char& c) {
  if (!peek_byte(c)) return false;
  ++begin_;
  return true;
}

bool CorpusStream::next_significant_byte(char& c) {
  while (next_byte(c)) {
    if (kJsonWhitespace.find(c) == std::string_view::npos) return true;
  }
  return false;
}

// The array's elements are found by their brackets and quotes alone, without parsing them (document_text
// does, as it does a JSON line), so that memory is one element whatever the size of the file: a file of
// gigabytes is one JSON value, which a parser would hold whole.
bool CorpusStream::next_array_element(std::string& element) {
  element.clear();
  if (array_closed_) return false;
  const auto refuse = [&](const std::string& what) {
    return DataError(fmt::format("{}: {}; a JSON array corpus file is '[', then objects separated by ',', then ']'. "
                                 "Fix the file (a download cut short?) or leave it out of --input",
                                 current_path().string(), what));
  };
  const auto ends_early = [&] { return refuse(fmt::format("the array ends without its closing ']' after element {}", line_)); };
  char c = 0;
  if (!next_significant_byte(c)) throw ends_early();
  if (!array_opened_) {
    if (c != '[') throw refuse("it does not begin with '['");
    array_opened_ = true;
    if (!next_significant_byte(c)) throw ends_early();
    if (c == ']') array_closed_ = true;
  } else if (c == ']') {
    array_closed_ = true;
  } else if (c != ',') {
    throw refuse(fmt::format("after element {}, {} where a ',' or the closing ']' belongs", line_, shown_byte(c)));
  } else if (!next_significant_byte(c)) {
    throw ends_early();
  } else if (c == ']') {
    throw refuse(fmt::format("a ',' after element {} and then the closing ']'", line_));
  }
  if (array_closed_) {
    if (next_significant_byte(c)) throw refuse(fmt::format("{} after the array's closing ']'", shown_byte(c)));
    return false;
  }
  // document_text refuses an element that is not an object.
  if (!next_json_value(c, element, "element", refuse)) throw ends_early();
  ++line_;
  return true;
}

// Note "json-objects": pretty-printed objects one after another (a .json or .jsonl file whose first line is a
// lone '{') are read as JSON Lines would be, each a document numbered from 1, so that the same objects written one
// per line prepare to the same shards.
bool CorpusStream::next_object(std::string& object) {
  object.clear();
  const auto refuse = [&](const std::string& what) {
    return DataError(
        fmt::format("{}: {}; a file whose first line is a lone '{{' (pretty-printed JSON) is read "
                    "as objects one after another, each a document. Fix the file (a download cut short?), "
                    "write one object per line (jq -c), or leave it out of --input",
                    current_path().string(), what));
  };
  char c = 0;
  if (!next_significant_byte(c)) return false;
  if (c != '{') {
    throw refuse(fmt::format("after object {}, {} where the next object's '{{' belongs", line_, shown_byte(c)));
  }
  if (!next_json_value(c, object, "object", refuse)) {
    throw refuse(fmt::format("object {} ends without its closing '}}'", line_ + 1));
  }
  ++line_;
  return true;
}

// The value from `c` on, found by its brackets and quotes alone, without parsing it (document_text does): to its
// closing bracket or quote, or for a number, true, false or null to the next ',' ']' or whitespace. False when
// the file ends inside it; one longer than any document is refused, named as `what` N.
bool CorpusStream::next_json_value(char c, std::string& value, std::string_view what,
                                   const std::function<DataError(const std::string&)>& refuse) {
  // The brackets open, innermost last: a closing one of the other kind is named here (before, it ended the value
  // early, and the next byte was blamed).
  std::string open;
  JsonCharacters characters;
  for (;;) {
    value.push_back(c);
    if (value.size() > kLongestJsonlLine) {
      throw refuse(fmt::format("{} {} is longer than {} MiB, more than any document loco reads", what, line_ + 1,
                               kLongestJsonlLine >> 20));
    }
    const JsonCharacters::Kind kind = characters.feed(c);
    if (kind == JsonCharacters::Kind::closes_string && open.empty()) return true;  // a string value
    if (kind == JsonCharacters::Kind::structure) {
      if (c == '{' || c == '[') {
        open.push_back(c);
      } else if (c == '}' || c == ']') {
        if (open.empty()) return true;  // a value that is a lone closer: document_text refuses it
        if (open.back() != (c == '}' ? '{' : '[')) {
          throw refuse(fmt::format("{} {} closes a '{}' with a '{}'", what, line_ + 1, open.back(), c));
        }
        open.pop_back();
        if (open.empty()) return true;
      } else if (open.empty()) {
        char after = 0;
        if (!peek_byte(after) || after == ',' || after == ']' ||
            kJsonWhitespace.find(after) != std::string_view::npos) {
          return true;
        }
      }
    }
    if (!next_byte(c)) return false;
  }
}

bool CorpusStream::next_in_file(std::uint32_t file, std::string& bytes, std::uint64_t& position) {
  if (table_) return table_->next(bytes, position);
  switch (files_[file].format) {
    case CorpusFormat::text:
      if (!next_text_part(bytes)) return false;
      position = line_++;  // a text file counts its parts where a JSON Lines file counts lines
      return true;
    case CorpusFormat::json_lines:
      if (!next_line(bytes)) return false;
      position = line_;  // counted by next_line
      return true;
    case CorpusFormat::json_array:
      if (!next_array_element(bytes)) return false;
      position = line_;  // counted by next_array_element
      return true;
    case CorpusFormat::json_objects:
      if (!next_object(bytes)) return false;
      position = line_;  // counted by next_object
      return true;
    default:  // a table file: read by table_ above
      return false;
  }
}

bool CorpusStream::next(RawDocument& document) {
  for (;;) {
    if (!stream_ && !table_ && !open_next_file()) return false;
    const auto file = static_cast<std::uint32_t>(next_file_ - 1);
    for (std::uint64_t position = 0; next_in_file(file, document.bytes, position);) {
      const std::uint64_t offset = text_offset_;  // of a text file's part
      text_offset_ += document.bytes.size();
      if (is_blank(document.bytes)) continue;
      if (utf8_only_) refuse_stray_bytes_of(files_[file], document.bytes, position, offset);
      document.file = file;
      document.line = position;
      document_bytes_ += document.bytes.size();
      return true;
    }
    close_file();
  }
}

namespace {

// Reads a .jsonl line's text field as the parser goes, keeping nothing else: a DOM of the whole line held
// about 40 times the line's size (a 40 MB line of nested arrays took 1.7 GB; the 256 MiB a line may have,
// about 10 GB). Only the top-level object's `field`, when it is a string, is kept (the last one, as a parse
// into a DOM would); nlohmann's SAX parser keeps one bit per level of nesting.
class TextFieldReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  // `name_fields`: keep the top-level object's first keys too, for the message of a line that lacks its text
  // field (a second reading of that line only: every other line would pay for them).
  explicit TextFieldReader(const std::string& field, bool name_fields = false)
      : field_(field), name_fields_(name_fields) {}

  // A null text is no document, as a null row of a Parquet or Arrow text column is not (`datasets`' to_json
  // writes null for such rows): an empty text, which holds no token (before: the line was refused).
  bool null() override {
    if (depth_ != 1 || !at_field_) return value("null");
    text_.clear();
    found_ = true;
    wrong_kind_.clear();
    at_field_ = false;
    return true;
  }
  bool boolean(bool) override { return value("true or false"); }
  bool number_integer(number_integer_t) override { return value("a number"); }
  bool number_unsigned(number_unsigned_t) override { return value("a number"); }
  bool number_float(number_float_t, const string_t&) override { return value("a number"); }
  bool binary(binary_t&) override { return value("binary data"); }
  bool string(string_t& text) override {
    if (depth_ == 1 && at_field_) {
      text_ = std::move(text);
      found_ = true;
      wrong_kind_.clear();
      at_field_ = false;
      return true;
    }
    return value("a string");
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0) top_is_object_ = true;
    value("an object");
    ++depth_;
    return true;
  }
  bool key(string_t& key) override {
    at_field_ = depth_ == 1 && key == field_;
    if (name_fields_ && depth_ == 1 && fields_.size() < kFieldsNamed) fields_.push_back(key);
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    value("an array");
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }

  bool top_is_object() const { return top_is_object_; }
  bool found() const { return found_; }
  std::string& text() { return text_; }
  const std::string& error() const { return error_; }
  // The top-level object's first keys (kept by a reader made with name_fields), for a message when the text
  // field is not among them.
  const std::vector<std::string>& fields() const { return fields_; }
  static constexpr std::size_t kFieldsNamed = 16;
  // What the text field holds when it is there but no string ("an array", "a number"); "" otherwise.
  const std::string& wrong_kind() const { return wrong_kind_; }

 private:
  // A value other than a string, of `kind`, was read (or an object or array begun): a field of that key is not
  // a string.
  bool value(const char* kind) {
    if (depth_ == 1 && at_field_) {
      found_ = false;
      wrong_kind_ = kind;
    }
    if (depth_ == 1) at_field_ = false;
    return true;
  }

  const std::string& field_;
  const bool name_fields_;
  int depth_ = 0;
  bool at_field_ = false, top_is_object_ = false, found_ = false;
  std::string text_, error_, wrong_kind_;
  std::vector<std::string> fields_;
};

// " (its fields: a, b, ...)" of an object whose text field is missing, quoted and escaped as JSON (a key may
// hold any character); "" for an object without fields, or a value that is no object.
std::string fields_named(const TextFieldReader& parsed) {
  if (!parsed.top_is_object() || parsed.fields().empty()) return "";
  std::string names;
  for (const std::string& field : parsed.fields()) {
    const std::string shown = field.size() > 64 ? utf8_prefix(field, 60) + "..." : field;
    names += (names.empty() ? "" : ", ") +
             nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return fmt::format(" (its fields: {}{})", names,
                     parsed.fields().size() == TextFieldReader::kFieldsNamed ? ", ..." : "");
}

}  // namespace

std::string document_text(RawDocument&& document, const std::vector<CorpusFile>& files,
                          const std::string& text_field) {
  const CorpusFile& file = files.at(document.file);
  if (!holds_json_records(file)) return std::move(document.bytes);
  const bool lines = file.format == CorpusFormat::json_lines;
  const bool array = file.format == CorpusFormat::json_array;
  const auto bad_line = [&](const std::string& what, const std::string& fix) {
    return DataError(fmt::format("{}{}{}: {}. Each {} must be a JSON object with a string \"{}\" field; {}.",
                                 file.path.string(),
                                 lines   ? ":"
                                 : array ? " element "
                                         : " object ",
                                 document.line, what,
                                 lines   ? "line of a JSON Lines file (.jsonl, .ndjson, or .json beginning with '{')"
                                 : array ? "element of a JSON array file (.json beginning with '[')"
                                         : "object of a file of pretty-printed JSON objects",
                                 text_field, fix));
  };
  const std::string fix_it = fmt::format("fix or remove it{}", lines ? " (blank lines are allowed)" : "");
  const auto finish = [&](TextFieldReader& parsed) {
    if (parsed.top_is_object() && !parsed.found() && !parsed.wrong_kind().empty()) {
      throw bad_line(fmt::format("its \"{}\" field is {}, not a string", text_field, parsed.wrong_kind()),
                     fix_it + ", or name the top-level field that holds the text as a string with --text-field");
    }
    if (!parsed.top_is_object() || !parsed.found()) {
      TextFieldReader naming(text_field, /*name_fields=*/true);
      nlohmann::json::sax_parse(document.bytes, &naming);  // the line parsed once already
      throw bad_line(fmt::format("no string \"{}\" field{}", text_field, fields_named(naming)),
                     fix_it +
                         ", or name the top-level field that holds the text with --text-field (loco reads "
                         "a field of the object itself, never one nested inside another)");
    }
    return std::move(parsed.text());
  };
  std::optional<TextFieldReader> reader(std::in_place, text_field);
  if (!nlohmann::json::sax_parse(document.bytes, &*reader)) {
    // What Python's json module reads beyond JSON (NaN, 1e400, a lone surrogate escape) is read as Python reads
    // it; rewriting costs a copy of the line, so only a line the parser refused is rewritten. A line still
    // refused is said by what is left wrong in it.
    const bool rewritten = rewrite_python_json_extensions(document.bytes) > 0;
    if (rewritten) {
      reader.emplace(text_field);
      if (nlohmann::json::sax_parse(document.bytes, &*reader)) return finish(*reader);
    }
    // The parser's message quotes the line's bytes: escaped where they are not UTF-8 (they reached the terminal).
    // After a rewrite its columns and quote are the rewritten line's: said so.
    std::string why = fmt::format("not valid JSON ({}{})", escape_invalid_utf8(reader->error()),
                                  rewritten ? "; column and quote as read with NaN, Infinity and numbers beyond "
                                              "double's range as null and lone surrogate escapes as \\ufffd"
                                            : "");
    const std::size_t cr = document.bytes.find('\r');
    if (lines && cr != std::string::npos && cr + 1 < document.bytes.size() && document.bytes[cr + 1] != '\n') {
      why +=
          ": it holds a carriage return without a line feed, so the file's lines may end with CR alone (old Mac "
          "line ends), which JSON Lines does not allow; convert them to LF (tr '\\r' '\\n')";
    }
    throw bad_line(why, fix_it);
  }
  return finish(*reader);
}

}  // namespace loco::data
