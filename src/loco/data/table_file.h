// What the readers of table files share: a file of columns (Parquet, Arrow IPC) of which one holds the
// documents, one text per row. Each reader (parquet_text.h, arrow_text.h) checks every count and size it
// reads against the file, since anyone may have written it, and names the file and the fix in each error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loco/util/error.h"

namespace loco::data {

// The errors of reading one file's text column, each naming the file and what to do.
struct TableFileProblems {
  std::filesystem::path path;
  std::string column;
  std::string format;  // "Parquet", "Arrow": how the errors name the file's kind

  // The file is well formed, but uses what loco does not read.
  DataError unsupported(const std::string& what) const;
  // The column cannot be the corpus's text: the option names another.
  DataError wrong_column(const std::string& what) const;
  // The file has no such column: `columns` are those it has.
  DataError missing_column(const std::vector<std::string>& columns) const;
  // The file does not add up.
  DataError damaged(const std::string& what) const;
};

// The text column of a table file, row by row.
class ColumnTextReader {
 public:
  virtual ~ColumnTextReader() = default;
  // The next row whose value is not null: its text and its number (1-based, every row counted); false after
  // the last row.
  virtual bool next(std::string& text, std::uint64_t& row) = 0;
  // Bytes of the file read or passed so far (the whole file once the last row is read: the other columns are
  // never read), for progress.
  virtual std::uint64_t file_bytes_read() const = 0;
};

// A file read at any offset (pread: no position shared between reads).
class PositionalFile {
 public:
  // Opens `problems.path` (IoError when it cannot be).
  explicit PositionalFile(const TableFileProblems& problems);
  ~PositionalFile();
  PositionalFile(const PositionalFile&) = delete;
  PositionalFile& operator=(const PositionalFile&) = delete;

  std::uint64_t size() const { return size_; }
  // `size` bytes at `offset`: problems.damaged when they lie past the file's end.
  std::string read_at(std::uint64_t offset, std::uint64_t size) const;

 private:
  const TableFileProblems& problems_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace loco::data
