// The documents of a corpus in one pass, in the order of its files (corpus_files.h): each non-blank
// line of a JSON Lines file, each element of a JSON array file, each non-blank text of a Parquet, Arrow, CSV
// or TSV file's text column, each non-blank text file, or part of a long one. Memory is one read buffer plus
// the document at hand, whatever the size of the corpus (of a text file's size too); compressed files are
// decoded on the way (byte_stream.h).
//
// Note "text-parts": a text file of up to kTextPartBytes is one document. A longer one (a book, a whole
// corpus in one file) is cut into parts of about that size, each a document of its own, so that the
// validation split can hold some of it out (a corpus of one file would otherwise be a single document,
// which cannot be split) and so that no document needs the whole file in memory. A part ends at the first
// paragraph break (a blank line) once it holds kTextPartBytes; failing that at the first line end once it
// holds twice as much; failing that (text without line ends) at a character boundary at four times. The
// parts, put back together, are the file's bytes (after a UTF-8 byte-order mark, which no part holds).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loco/data/byte_stream.h"
#include "loco/data/corpus_files.h"
#include "loco/data/table_file.h"
#include "loco/util/error.h"

namespace loco::data {

inline constexpr std::size_t kTextPartBytes = 16 << 10;

struct RawDocument {
  std::uint32_t file = 0;  // index into the corpus's files
  // 1-based line of a JSON Lines file, 1-based element of a JSON array file, 1-based row of a table file;
  // 0-based part of a text file (0: the whole of a short one)
  std::uint64_t line = 0;
  std::string bytes;  // the JSON line or array element as read, the table row's text, or the text file's part
};

class CorpusStream {
 public:
  // `text_field`: the column of a table file that holds its documents (a JSON record's field is taken by
  // document_text, as the encoding threads parse them). `utf8_only`: the text is for a BPE tokenizer, and a file
  // that holds bytes that are not UTF-8 is refused (utf8_text_check.h): at its start as it opens, further in as
  // its documents are read.
  CorpusStream(const std::vector<CorpusFile>& files, std::string text_field, bool utf8_only);
  ~CorpusStream();

  // The next document; false after the last. Errors of the files (IoError, DataError) propagate.
  bool next(RawDocument& document);

  // Bytes of the files consumed so far (compressed bytes where compressed), for progress.
  std::uint64_t file_bytes_read() const;
  // Bytes of the documents returned so far, as decompressed: what a compressed corpus expands to (1 MB of
  // gzip can be a gigabyte), which file_bytes_read() does not show.
  std::uint64_t document_bytes_read() const { return document_bytes_; }

 private:
  // The next document of file `file` (the one open), blank or not, and its position (RawDocument::line);
  // false at the file's end.
  bool next_in_file(std::uint32_t file, std::string& bytes, std::uint64_t& position);
  bool next_line(std::string& line);
  bool next_text_part(std::string& part);
  bool next_array_element(std::string& element);
  bool next_object(std::string& object);
  bool next_json_value(char c, std::string& value, std::string_view what,
                       const std::function<DataError(const std::string&)>& refuse);
  // The next byte of the file, consumed (next_byte) or not (peek_byte); false at its end.
  bool next_byte(char& c);
  bool peek_byte(char& c);
  // The next byte that is not JSON whitespace, consumed; false at the file's end.
  bool next_significant_byte(char& c);
  const fs::path& current_path() const { return files_[next_file_ - 1].path; }
  bool open_next_file();
  void skip_byte_order_mark();
  // DataError when `bytes`, a document of `file` at `position` (RawDocument::line), at `offset` in a text file,
  // hold a byte that is not UTF-8 (utf8_text_check.h).
  void refuse_stray_bytes_of(const CorpusFile& file, std::string_view bytes, std::uint64_t position,
                             std::uint64_t offset) const;
  void close_file();

  const std::vector<CorpusFile>& files_;
  std::string text_field_;
  bool utf8_only_;
  std::uint64_t text_offset_ = 0;  // in the open text file, as decompressed, of its next part
  std::size_t next_file_ = 0;
  std::unique_ptr<ByteStream> stream_;       // the file at hand, but for a table file
  std::unique_ptr<ColumnTextReader> table_;  // the table file at hand
  std::uint64_t finished_file_bytes_ = 0;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;  // unread bytes of buffer_
  bool end_of_file_ = false;
  std::uint64_t line_ = 0;
  bool array_opened_ = false, array_closed_ = false;  // of a JSON array file: its '[' and its ']' were read
  std::uint64_t document_bytes_ = 0;
};

// The text of a document: a text file's part or a table row's text (moved out), or a JSON line's or array
// element's string field
// `text_field` (DataError "FILE:LINE: ..." or "FILE element N: ..." with the fix when it is not a JSON object
// with that field).
std::string document_text(RawDocument&& document, const std::vector<CorpusFile>& files,
                          const std::string& text_field);

}  // namespace loco::data
