// The text column of a CSV or TSV file, row by row: the header's names the columns, and each record after
// it is a row (Kaggle's and many a dataset's form; pandas' to_csv). Read as Python's csv module and pandas
// read it, which the tests take as the reference (tests/reference/make_csv_fixtures.py):
//
//   - fields are separated by the delimiter (',' for .csv, a tab for .tsv); records end at "\n", "\r\n" or
//     "\r"; a field that begins with '"' is quoted: it may hold delimiters and line ends, and "" in it stands
//     for one '"' (what follows its closing quote, up to the next delimiter, is kept as it is);
//   - a UTF-8 byte-order mark before the header is not part of its first name; blank lines are no rows;
//   - a row whose text field is empty, or that ends before the text column, holds no document;
//   - the file may be compressed (.csv.gz, .tsv.zst …: byte_stream.h).
//
// Memory is one record (at most kLongestCsvRecord) and a read buffer, whatever the file's size. A row with
// more fields than the header (a delimiter in an unquoted field: the columns no longer line up), a quote that
// never closes, a record over the bound, or a header without the column is a DataError naming the file, the
// line and the fix.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "loco/data/table_file.h"

namespace loco::data {

inline constexpr std::size_t kLongestCsvRecord = std::size_t{256} << 20;

// Opens `path` and reads its header (DataError naming the columns there when none is `column`). Rows are
// numbered from 1 after the header, blank lines not counted.
std::unique_ptr<ColumnTextReader> open_csv_text(const std::filesystem::path& path, const std::string& column,
                                                char delimiter, bool utf8_only);

}  // namespace loco::data
