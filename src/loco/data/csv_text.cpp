#include "loco/data/csv_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "loco/data/byte_stream.h"
#include "loco/data/utf8_text_check.h"

namespace loco::data {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kReadBuffer = 256 << 10;
// A header of more columns than this is refused before its names fill memory (a record of commas is
// millions of empty fields); Excel's sheets end at 16,384 columns.
constexpr std::size_t kMaxCsvColumns = 1 << 16;

// A header read as one field, that is another delimiter's header: Excel in many European locales writes CSV
// separated by ';' (and may begin it with "sep=;", its note of the delimiter), and a .csv may be tab-separated or
// a .tsv comma-separated. Said as such, with what converts it: naming the one field with --text-field would read
// every row whole.
void refuse_another_delimiter(const fs::path& path, const std::string& field, char delimiter) {
  const bool excel_note = field.rfind("sep=", 0) == 0 && field.size() == 5;
  char other = excel_note ? field[4] : '\0';
  for (const char candidate : {';', '\t', ','}) {
    if (other == '\0' && candidate != delimiter && field.find(candidate) != std::string::npos) other = candidate;
  }
  if (other == '\0' || (other == delimiter && !excel_note)) return;
  const auto name = [](char c) { return c == '\t' ? std::string("tabs") : fmt::format("'{}'", c); };
  const std::string drop_note = excel_note ? ", and drop its first line (sep=…)" : "";
  if (other == delimiter || (other != ';' && other != '\t' && other != ',')) {  // "sep=," in a .csv, "sep=|"
    throw DataError(fmt::format("{}: its first line '{}' is Excel's note of the delimiter, which loco does not read{}",
                                path.string(), field,
                                other == delimiter ? ": drop that line"
                                                   : fmt::format(", and loco reads no file separated by {}: save it "
                                                                 "again as \"CSV UTF-8 (comma delimited)\"",
                                                                 name(other))));
  }
  const std::string expected =
      delimiter == '\t' ? "a .tsv file as separated by tabs" : "a .csv file as separated by commas";
  const std::string found = excel_note ? fmt::format("its first line '{}' is Excel's note of the delimiter:", field)
                                       : fmt::format("its header '{}' holds no {} but {}:", field,
                                                     delimiter == '\t' ? "tab" : "','", name(other));
  if (other != ';') {
    throw DataError(fmt::format("{}: {} the file is separated by {}, and loco reads {}. Name it with {} at the end{}",
                                path.string(), found, name(other), expected, other == '\t' ? ".tsv" : ".csv",
                                drop_note));
  }
  throw DataError(fmt::format(
      "{}: {} the file is separated by ';' (as Excel writes CSV in many locales), and loco reads {}. Save it "
      "again as \"CSV UTF-8 (comma delimited)\", or convert it{}: `python3 -c 'import csv, sys; "
      "csv.writer(sys.stdout).writerows(csv.reader(sys.stdin, delimiter=\";\"))' < IN > OUT.csv`",
      path.string(), found, expected, excel_note ? " without its sep= line" : ""));
}

// The reader of csv_text.h.
class CsvTextReader final : public ColumnTextReader {
 public:
  CsvTextReader(const fs::path& path, const std::string& column, char delimiter, bool utf8_only)
      : problems_{path, column, delimiter == '\t' ? "TSV" : "CSV"},
        delimiter_(delimiter),
        stream_(path),
        buffer_(kReadBuffer) {
    end_ = stream_.read_at_least(buffer_.data(), buffer_.size(), kBinaryTestBytes);
    end_of_file_ = end_ == 0;
    refuse_what_is_not_utf8_text(path, std::string_view(buffer_.data(), end_));
    // Fewer bytes than were asked for: the file ended (read_at_least), and no character is cut at their end.
    if (utf8_only)
      refuse_bytes_that_are_not_utf8(path, std::string_view(buffer_.data(), end_), end_ >= kBinaryTestBytes);
    if (std::string_view(buffer_.data(), end_).substr(0, 3) == "\xEF\xBB\xBF") begin_ = 3;
    if (!next_record(kMaxCsvColumns)) {
      throw DataError(fmt::format("{} is empty: a {} corpus file begins with a header that names its columns",
                                  path.string(), problems_.format));
    }
    if (fields_.size() == kMaxCsvColumns) {
      throw DataError(
          fmt::format("{}: its header names {} columns or more, more than any table loco reads (not {}, "
                      "or the wrong delimiter?). Fix the file, or leave it out of --input",
                      path.string(), kMaxCsvColumns, problems_.format));
    }
    const auto found = std::find(fields_.begin(), fields_.end(), column);
    if (found == fields_.end()) {
      if (fields_.size() == 1) refuse_another_delimiter(path, fields_.front(), delimiter);
      // Excel's note of this very delimiter ("sep=," read as the fields "sep=" and "").
      if (fields_.size() == 2 && fields_[0] == "sep=" && fields_[1].empty()) {
        refuse_another_delimiter(path, std::string("sep=") + delimiter, delimiter);
      }
      fields_.resize(std::min<std::size_t>(fields_.size(), 20));
      throw problems_.missing_column(fields_);
    }
    // Readers disagree on a name given twice (pandas reads the first, Python's csv.DictReader the last).
    if (const auto again = std::find(found + 1, fields_.end(), column); again != fields_.end()) {
      throw DataError(
          fmt::format("{}: its header names the column '{}' twice (columns {} and {}), and which of them "
                      "holds the text is not clear. Rename one, or name another with --text-field",
                      path.string(), column, found - fields_.begin() + 1, again - fields_.begin() + 1));
    }
    header_fields_ = fields_.size();
    text_index_ = static_cast<std::size_t>(found - fields_.begin());
  }

  bool next(std::string& text, std::uint64_t& row) override {
    // Reading stops at one field more than the header's: the row is refused then.
    while (next_record(header_fields_ + 1)) {
      ++row_;
      if (fields_.size() > header_fields_) {
        throw DataError(fmt::format(
            "{} line {}: row {} has more fields than the {} its header names: a field that holds the delimiter ({}) "
            "must be quoted. Fix the file (or give the right extension: .csv is comma-separated, .tsv tab-"
            "separated), or leave it out of --input",
            problems_.path.string(), record_line_, row_, header_fields_, delimiter_ == '\t' ? "a tab" : "','"));
      }
      if (text_index_ < fields_.size()) {
        text = std::move(fields_[text_index_]);
        row = row_;
        return true;
      }
    }
    return false;
  }

  std::uint64_t file_bytes_read() const override { return stream_.file_bytes_read(); }

 private:
  // Makes unread bytes available; false at the file's end.
  bool refill() {
    if (begin_ < end_) return true;
    if (end_of_file_) return false;
    begin_ = 0;
    end_ = stream_.read(buffer_.data(), buffer_.size());
    end_of_file_ = end_ == 0;
    return !end_of_file_;
  }

  // Consumes a line end that begins with `c` ('\n', or '\r' and a '\n' after it).
  void end_line(char c) {
    if (c == '\r' && refill() && buffer_[begin_] == '\n') ++begin_;
    ++line_;
  }

  void grow(std::string& field, const char* from, std::size_t count) {
    record_bytes_ += count;
    if (record_bytes_ > kLongestCsvRecord) {
      throw DataError(
          fmt::format("{} line {}: a record longer than {} MiB, more than any document loco reads (a "
                      "quote that never closes?). Fix the file, or leave it out of --input",
                      problems_.path.string(), record_line_, kLongestCsvRecord >> 20));
    }
    field.append(from, count);
  }

  // The next record's fields into fields_, at most `most` of them (the rest of a longer record is left
  // unread); false at the file's end. Blank lines are skipped.
  bool next_record(std::size_t most) {
    for (;;) {
      if (!refill()) return false;
      record_line_ = line_ + 1;
      record_bytes_ = 0;
      if (buffer_[begin_] == '\n' || buffer_[begin_] == '\r') {  // a blank line
        end_line(buffer_[begin_++]);
        continue;
      }
      fields_.clear();
      do {
        fields_.emplace_back();
      } while (read_field(fields_.back()) && fields_.size() < most);  // until the record's end, or `most`
      return true;
    }
  }

  // Reads one field into `field`; true when a delimiter followed it (another field comes), false when the
  // record ended (a line end, or the file's end).
  bool read_field(std::string& field) {
    bool quoted = refill() && buffer_[begin_] == '"';
    if (quoted) ++begin_;
    for (;;) {
      if (!refill()) {
        if (quoted) {
          throw DataError(
              fmt::format("{} line {}: a quoted field opened in the record of line {} never closes: "
                          "the file was cut short, or a '\"' in a field is not doubled. Fix the "
                          "file, or leave it out of --input",
                          problems_.path.string(), line_ + 1, record_line_));
        }
        return false;
      }
      const char* start = buffer_.data() + begin_;
      const std::size_t count = end_ - begin_;
      if (quoted) {
        const std::size_t run = static_cast<std::size_t>(std::find(start, start + count, '"') - start);
        line_ += static_cast<std::uint64_t>(std::count(start, start + run, '\n'));
        grow(field, start, run);
        begin_ += run;
        if (run == count) continue;
        ++begin_;  // the quote: a doubled one stands for '"'; else the field's quoting ends
        if (refill() && buffer_[begin_] == '"') {
          grow(field, start + run, 1);
          ++begin_;
        } else {
          quoted = false;  // what follows, to the delimiter, is kept as it is
        }
        continue;
      }
      std::size_t run = 0;
      while (run < count && start[run] != delimiter_ && start[run] != '\n' && start[run] != '\r') ++run;
      grow(field, start, run);
      begin_ += run;
      if (run == count) continue;
      const char stop = buffer_[begin_++];
      if (stop == delimiter_) return true;
      end_line(stop);
      return false;
    }
  }

  const TableFileProblems problems_;
  const char delimiter_;
  ByteStream stream_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;  // unread bytes of buffer_
  bool end_of_file_ = false;
  std::uint64_t line_ = 0;         // line ends read so far
  std::uint64_t record_line_ = 0;  // the line the record at hand began on
  std::size_t record_bytes_ = 0;
  std::vector<std::string> fields_;
  std::size_t header_fields_ = 0, text_index_ = 0;
  std::uint64_t row_ = 0;
};

}  // namespace

std::unique_ptr<ColumnTextReader> open_csv_text(const fs::path& path, const std::string& column, char delimiter,
                                                bool utf8_only) {
  return std::make_unique<CsvTextReader>(path, column, delimiter, utf8_only);
}

}  // namespace loco::data
