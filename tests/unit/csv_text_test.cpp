// CSV and TSV corpora (data/csv_text.h): what Python's csv module reads from files it wrote in several
// dialects and from odd files written by hand (tests/fixtures/csv, made by tests/reference/make_csv_fixtures.py)
// is what loco reads, row for row; the same rows as JSON Lines prepare to the same shards; the errors name the
// file, the line and the fix.
#include "loco/data/csv_text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loco/data/corpus_files.h"
#include "loco/data/dataset_meta.h"
#include "loco/util/error.h"
#include "support/table_fixtures.h"
#include "support/test_support.h"

namespace loco::data {
namespace {

using test::error_message;
using test::read_text;
using test::ScratchDir;
using test::write_text;

const fs::path kCsv = fs::path(LOCO_FIXTURE_DIR) / "csv";

using Rows = std::vector<std::pair<std::uint64_t, std::string>>;

Rows read_all(const fs::path& path, char delimiter) {
  const auto reader = open_csv_text(path, "text", delimiter, /*utf8_only=*/true);
  Rows rows;
  std::string text;
  for (std::uint64_t row = 0; reader->next(text, row);) rows.emplace_back(row, text);
  EXPECT_EQ(reader->file_bytes_read(), fs::file_size(path)) << path;
  return rows;
}

// Python's csv module wrote these with QUOTE_MINIMAL and "\r\n", QUOTE_ALL with tabs and "\n", QUOTE_NONNUMERIC
// and "\r" (quoted fields holding commas, tabs, doubled quotes and every kind of line end; blank lines between
// rows); by_hand.csv has a byte-order mark, the text column first, characters after a closing quote, quotes
// inside an unquoted field, a short row and no line end at its end. Each gives the rows csv.DictReader gives.
TEST(CsvText, EachDialectGivesTheRowsPythonsCsvModuleReads) {
  std::ifstream in(kCsv / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  ASSERT_EQ(expected.size(), 4u);
  for (const auto& [name, rows] : expected.items()) {
    Rows wanted;
    for (const auto& row : rows) wanted.emplace_back(row[0].get<std::uint64_t>(), row[1].get<std::string>());
    EXPECT_EQ(read_all(kCsv / name, fs::path(name).extension() == ".tsv" ? '\t' : ','), wanted) << name;
  }
}

// The same rows as JSON Lines prepare to the same shards and tokenizer, from a .csv and from a .tsv.gz.
TEST(CsvText, ACsvFileAndJsonLinesOfTheSameRowsPrepareTheSameShards) {
  std::ifstream in(kCsv / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  std::vector<std::optional<std::string>> texts;
  for (const auto& row : expected["minimal_crlf.csv"]) texts.push_back(row[1].get<std::string>());
  ScratchDir scratch;
  write_text(scratch / "csv/docs.csv", read_text(kCsv / "minimal_crlf.csv"));
  test::expect_prepared_like_json_lines(scratch.path(), texts, scratch / "csv");
  ScratchDir gzipped;
  const std::string tsv = read_text(kCsv / "all_quoted.tsv");
  gzFile out = gzopen((gzipped / "tsv-gz").c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, tsv.data(), static_cast<unsigned>(tsv.size())), static_cast<int>(tsv.size()));
  gzclose(out);
  fs::create_directories(gzipped / "tsv");
  fs::rename(gzipped / "tsv-gz", gzipped / "tsv/docs.tsv.gz");
  test::expect_prepared_like_json_lines(gzipped.path(), texts, gzipped / "tsv");
}

// A header without the column names the columns there; a row with more fields than the header (an unquoted
// delimiter), a quote that never closes and an empty file are refused, naming the file and the line.
TEST(CsvText, WhatDoesNotLineUpIsRefusedNamingTheLine) {
  ScratchDir scratch;
  const auto error = [&](const std::string& name, const std::string& bytes) {
    write_text(scratch / name, bytes);
    return error_message([&] { read_all(scratch / name, fs::path(name).extension() == ".tsv" ? '\t' : ','); });
  };
  EXPECT_NE(error("a.csv", "id,body\n1,x\n")
                .find("a.csv has no column 'text'; its columns are id, body. Name the one "
                      "that holds the text with --text-field"),
            std::string::npos);
  EXPECT_NE(error("b.csv", "id,text\n1,fine\n2,\"multi\nline\"\n3,one, two\n")
                .find("b.csv line 5: row 3 has more fields than the 2 its header names: a field that holds the "
                      "delimiter (',') must be quoted"),
            std::string::npos);
  // "\r\n" is one line end, as is a lone "\r".
  EXPECT_NE(error("crlf.csv", "id,text\r\n1,fine\r\n2,a,b\r\n").find("crlf.csv line 3: row 2 has more fields"),
            std::string::npos);
  EXPECT_NE(error("cr.csv", "id,text\r1,fine\r\r2,a,b\r").find("cr.csv line 4: row 2 has more fields"),
            std::string::npos);
  EXPECT_NE(error("c.tsv", "id\ttext\n1\tfine\n2\t\"open\nand on\n")
                .find("c.tsv line 5: a quoted field opened in the record of line 3 never closes"),
            std::string::npos);
  EXPECT_NE(error("d.csv", "\xEF\xBB\xBF").find("d.csv is empty: a CSV corpus file begins with a header"),
            std::string::npos);
  // A record of commas is not read to its end: a header of too many columns, a row of one field too many.
  EXPECT_NE(error("wide.csv", "text" + std::string(100000, ',') + "\n")
                .find("wide.csv: its header names 65536 columns or more"),
            std::string::npos);
  EXPECT_NE(error("row.csv", "id,text\n1" + std::string(50'000'000, ','))
                .find("row.csv line 2: row 1 has more fields than the 2"),
            std::string::npos);
  // A header of another delimiter is said as such (before: "its columns are id;text. Name the one that holds the
  // text with --text-field", which then read every row whole).
  EXPECT_NE(error("e.csv", "id\ttext\n1\tx\n")
                .find("e.csv: its header 'id\ttext' holds no ',' but tabs: the file is separated by tabs, and loco "
                      "reads a .csv file as separated by commas. Name it with .tsv at the end"),
            std::string::npos);
  EXPECT_NE(error("f.tsv", "id,text\n1,x\n")
                .find("the file is separated by ',', and loco reads a .tsv file as "
                      "separated by tabs. Name it with .csv at the end"),
            std::string::npos);
  EXPECT_NE(error("semicolons.csv", "id;text\n1;\"hello, there\"\n")
                .find("semicolons.csv: its header 'id;text' holds no ',' but ';': the file is separated by ';' (as "
                      "Excel writes CSV in many locales), and loco reads a .csv file as separated by commas. Save it "
                      "again as \"CSV UTF-8 (comma delimited)\", or convert it: `python3 -c"),
            std::string::npos);
  EXPECT_NE(error("excel.csv", "sep=;\nid;text\n1;x\n")
                .find("excel.csv: its first line 'sep=;' is Excel's note of the delimiter: the file is separated by "
                      "';'"),
            std::string::npos);
  EXPECT_NE(error("one.csv", "body\nx\n").find("one.csv has no column 'text'; its columns are body."),
            std::string::npos);
  EXPECT_NE(error("pipes.csv", "sep=|\nid|text\n")
                .find("its first line 'sep=|' is Excel's note of the delimiter, "
                      "which loco does not read, and loco reads no file separated "
                      "by '|'"),
            std::string::npos);
  EXPECT_NE(error("commas.csv", "sep=,\nid,text\n")
                .find("its first line 'sep=,' is Excel's note of the delimiter, "
                      "which loco does not read: drop that line"),
            std::string::npos);
  EXPECT_NE(error("tabs.csv", "sep=\t\nid\ttext\n").find("Name it with .tsv at the end, and drop its first line"),
            std::string::npos);
  // pandas reads the first of two columns of one name, Python's csv.DictReader the last.
  EXPECT_NE(error("twice.csv", "text,id,text\nfirst,1,second\n")
                .find("twice.csv: its header names the column 'text' twice (columns 1 and 3), and which of them holds "
                      "the text is not clear. Rename one, or name another with --text-field"),
            std::string::npos);
  // Listed in a corpus, .csv and .tsv (compressed too) are read as tables.
  write_text(scratch / "list/a.csv", "text\nx\n");
  write_text(scratch / "list/b.tsv.zst", "");
  const std::vector<CorpusFile> files = list_corpus_files({scratch / "list"}, scratch / "out");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].format, CorpusFormat::csv);
  EXPECT_EQ(files[1].format, CorpusFormat::tsv);
}

}  // namespace
}  // namespace loco::data
