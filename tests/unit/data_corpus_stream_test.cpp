// The document stream of `loco prepare` (CorpusStream): the files of a corpus, what is skipped and why,
// text that is not UTF-8, JSON Lines, JSON arrays and objects as tools write them, and long texts cut into parts.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "loco/data/byte_stream.h"
#include "loco/data/corpus_files.h"
#include "loco/data/corpus_stream.h"
#include "loco/data/utf8_text_check.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"
#include "unit/compressed_inputs.h"
#include "unit/data_test_helpers.h"

namespace loco::data {
namespace {

using test::bzip2;
using test::gzip;
using test::read_all;
using test::ScratchDir;
using test::varied_text;
using test::write_text;
using test::xz;
using test::zstd_frame;

TEST(DataCorpusStream, YieldsNonBlankLinesAndFilesWithTheirPositions) {
  ScratchDir scratch;
  // A line longer than the stream's 4 MiB buffer, a last line without a newline, blank lines.
  const std::string long_line = "{\"text\": \"" + std::string(5 << 20, 'x') + "\"}";
  write_text(scratch / "a.jsonl", "{\"text\": \"one\"}\n\n  \n" + long_line + "\n{\"text\": \"last\"}");
  write_text(scratch / "b.txt.gz", gzip("a text file\nof two lines\n"));
  write_text(scratch / "c.jsonl.zst", zstd_frame("{\"body\": \"zst\"}\n"));
  write_text(scratch / "d.txt", " \n\t");
  const std::vector<CorpusFile> files = list_corpus_files({scratch.path()}, scratch / "out");
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].format, CorpusFormat::json_lines);
  EXPECT_EQ(files[1].format, CorpusFormat::text);
  EXPECT_EQ(files[2].format, CorpusFormat::json_lines);

  CorpusStream stream(files, "text", /*utf8_only=*/true);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> positions;
  std::vector<std::string> texts;
  for (RawDocument document; stream.next(document);) {
    positions.emplace_back(document.file, document.line);
    texts.push_back(document_text(std::move(document), files, document.file == 2 ? "body" : "text"));
  }
  using Position = std::pair<std::uint32_t, std::uint64_t>;
  EXPECT_EQ(positions, (std::vector<Position>{{0, 1}, {0, 4}, {0, 5}, {1, 0}, {2, 1}}));
  ASSERT_EQ(texts.size(), 5u);
  EXPECT_EQ(texts[0], "one");
  EXPECT_EQ(texts[1].size(), 5u << 20);
  EXPECT_EQ(texts[2], "last");
  EXPECT_EQ(texts[3], "a text file\nof two lines\n");
  EXPECT_EQ(texts[4], "zst");
  std::uint64_t on_disk = 0;
  for (const auto& file : files) on_disk += file.bytes;
  EXPECT_EQ(stream.file_bytes_read(), on_disk);
}

// A .jsonl line's text is read as the parser goes (nothing else of the line is kept: a DOM of a 40 MB line
// took 1.7 GB): the top-level object's field only, the last one when it is given twice, as a DOM would have it.
// A prepared data directory or a checkpoint under an input is loco's own output: skipped and said (before, its
// shards, weights and JSON were read as text into the corpus); one given as the input itself is refused, named.
TEST(DataCorpusStream, DirectoriesLocoWroteAreNeitherReadNorTakenAsACorpus) {
  ScratchDir scratch;
  write_text(scratch / "corpus" / "a.txt", "text\n");
  write_text(scratch / "corpus" / "data" / "meta.json", "{}");
  write_text(scratch / "corpus" / "data" / "tokenizer.json", "{}");
  write_text(scratch / "corpus" / "data" / "train_000.bin", "\x01\x02");
  write_text(scratch / "corpus" / "run" / "checkpoints" / "step_8" / "state.json", "{}");
  write_text(scratch / "corpus" / "run" / "checkpoints" / "step_8" / "model.safetensors", "weights");
  write_text(scratch / "corpus" / "run" / "notes.txt", "a run's own notes are text\n");
  write_text(scratch / "corpus" / "meta.json", "{}");                          // one marker alone is no loco output
  write_text(scratch / "corpus" / "killed" / ".loco-prepare-incomplete", "");  // a `loco prepare` killed half-way
  write_text(scratch / "corpus" / "killed" / "train_000.bin", std::string("\x01\0", 2));
  std::vector<SkippedInput> skipped;
  const std::vector<CorpusFile> files = list_corpus_files({scratch / "corpus"}, scratch / "out", &skipped);
  std::vector<std::string> names;
  for (const CorpusFile& file : files) names.push_back(file.path.lexically_relative(scratch / "corpus").string());
  EXPECT_EQ(names, (std::vector<std::string>{"a.txt", "meta.json", "run/notes.txt"}));
  std::vector<std::string> skipped_names;
  for (const SkippedInput& input : skipped) {
    skipped_names.push_back(input.path.lexically_relative(scratch / "corpus").string() + ": " + input.reason);
  }
  std::sort(skipped_names.begin(), skipped_names.end());  // a directory's entries come in no set order
  EXPECT_EQ(skipped_names,
            (std::vector<std::string>{
                "data: it is a prepared data directory (loco's own output is not read as text)",
                "killed: it is the directory of a `loco prepare` that did not finish (loco's own output is not read "
                "as text)",
                "run/checkpoints/step_8: it is a checkpoint (loco's own output is not read as text)"}));
  try {
    list_corpus_files({scratch / "corpus" / "data"}, scratch / "out");
    ADD_FAILURE() << "a prepared data directory was taken as a corpus";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("is a prepared data directory, which loco wrote, not a corpus: its files are "
                                         "a tokenizer and token shards, not text. Give the text it was prepared from "
                                         "(--tokenizer-from"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(list_corpus_files({scratch / "corpus" / "run" / "checkpoints" / "step_8"}, scratch / "out"), DataError);
  EXPECT_THROW(list_corpus_files({scratch / "corpus" / "killed"}, scratch / "out"), DataError);
}

// The skipped entries of one listing as "path relative to `root`: reason", sorted.
std::vector<std::string> skipped_relative(const std::vector<SkippedInput>& skipped, const fs::path& root) {
  std::vector<std::string> out;
  for (const SkippedInput& input : skipped) {
    out.push_back(input.path.lexically_relative(root).string() + ": " + input.reason);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A file read twice would be trained on twice and could land in both splits: given twice, given and inside a
// directory given, or reached again through a link, it is read at its first name and the others are said.
TEST(DataCorpusStream, AFileNamedTwiceIsReadOnce) {
  ScratchDir scratch;
  write_text(scratch / "corpus" / "a.txt", "a\n");
  write_text(scratch / "corpus" / "b.txt", "b\n");
  fs::create_symlink("a.txt", scratch / "corpus" / "z-link-to-a.txt");
  fs::create_directory_symlink("corpus", scratch / "alias");
  std::vector<SkippedInput> skipped;
  const std::vector<CorpusFile> files = list_corpus_files(
      {scratch / "corpus", scratch / "corpus" / "b.txt", scratch / "alias" / "a.txt"}, scratch / "out", &skipped);
  std::vector<std::string> names;
  for (const CorpusFile& file : files) names.push_back(file.path.lexically_relative(scratch / "corpus").string());
  EXPECT_EQ(names, (std::vector<std::string>{"a.txt", "b.txt"}));
  const std::string a = (scratch / "corpus" / "a.txt").string(), b = (scratch / "corpus" / "b.txt").string();
  EXPECT_EQ(skipped_relative(skipped, scratch / "corpus"),
            (std::vector<std::string>{"../alias/a.txt: it is the same file as " + a + ", which is read once",
                                      "b.txt: it is the same file as " + b + ", which is read once",
                                      "z-link-to-a.txt: it is the same file as " + a + ", which is read once"}));
}

// What a directory holds that is no file to read is named with the reason, not passed over in silence (a link
// to a missing mount made part of a corpus vanish) nor stopping the run (a link to itself did):
// links that lead nowhere or loop, links to directories (not followed: they can loop), FIFOs (reading one may
// never end). Hidden entries are skipped and marked, for prepare to say in one line.
TEST(DataCorpusStream, WhatADirectoryHoldsThatIsNoFileIsNamedWithTheReason) {
  ScratchDir scratch;
  const fs::path corpus = scratch / "corpus";
  write_text(corpus / "a.txt", "a\n");
  write_text(corpus / "sub" / "b.txt", "b\n");
  write_text(corpus / ".hidden" / "c.txt", "c\n");
  write_text(corpus / ".d.txt", "d\n");
  fs::create_symlink("missing.txt", corpus / "dangling.txt");
  fs::create_symlink("self", corpus / "self");
  fs::create_symlink("sub", corpus / "sub-link");
  ASSERT_EQ(::mkfifo((corpus / "pipe").c_str(), 0600), 0);
  std::vector<SkippedInput> skipped;
  const std::vector<CorpusFile> files = list_corpus_files({corpus}, scratch / "out", &skipped);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].path, corpus / "sub" / "b.txt");
  EXPECT_EQ(skipped_relative(skipped, corpus),
            (std::vector<std::string>{
                ".d.txt: its name begins with '.' (name it in --input to read it)",
                ".hidden: its name begins with '.' (name it in --input to read it)",
                "dangling.txt: it is a symbolic link to missing.txt that cannot be followed: No such file or directory",
                "pipe: it is not a regular file (a FIFO, socket or device: reading one may never end)",
                "self: it is a symbolic link to self that cannot be followed: Too many levels of symbolic links",
                "sub-link: it is a symbolic link to a directory, which loco does not follow (links can loop): give "
                "the directory itself in --input to read it"}));
  EXPECT_EQ(std::count_if(skipped.begin(), skipped.end(), [](const SkippedInput& s) { return s.hidden; }), 2);
}

// A corpus is UTF-8 text: a UTF-16 or UTF-32 file, or a binary one (a NUL byte in its first 8000 bytes,
// compressed or not), is refused by name with the fix, before any of it is read as text (before: encoded as
// text, NULs between the letters, silently). A UTF-8 byte-order mark is read past: a document does not begin with
// U+FEFF (before: it did), a file of the mark alone is empty, and a JSON Lines file's first line may be blank after
// it (before: refused as not JSON).
TEST(DataCorpusStream, WhatIsNotUtf8TextIsRefusedByName) {
  ScratchDir scratch;
  const auto refusal = [&](const std::string& name, const std::string& bytes) -> std::string {
    write_text(scratch / name, bytes);
    RawDocument document;
    try {  // a .json file is looked at when it is listed, to tell its format
      const std::vector<CorpusFile> files = list_corpus_files({scratch / name}, scratch / "out");
      CorpusStream stream(files, "text", /*utf8_only=*/true);
      stream.next(document);
    } catch (const DataError& e) {
      return e.what();
    }
    return "read: " + document.bytes;
  };
  const std::string hello16 = std::string("h\0e\0l\0l\0o\0", 10);
  EXPECT_NE(
      refusal("le.txt", "\xFF\xFE" + hello16)
          .find("le.txt is UTF-16 text (it begins with a byte-order mark), but loco reads UTF-8: convert it, e.g. "
                "`iconv -f UTF-16 -t UTF-8"),
      std::string::npos);
  EXPECT_NE(refusal("be.txt", "\xFE\xFF" + hello16).find("is UTF-16 text"), std::string::npos);
  EXPECT_NE(refusal("le32.txt", std::string("\xFF\xFE\0\0h\0\0\0", 8)).find("is UTF-32 text"), std::string::npos);
  EXPECT_NE(refusal("le.jsonl", "\xFF\xFE" + hello16).find("is UTF-16 text"), std::string::npos);
  EXPECT_NE(refusal("no-mark.txt", hello16).find("no-mark.txt holds a NUL byte at offset 1: it is not UTF-8 text"),
            std::string::npos);
  const std::string image = "\x89PNG\r\n\x1a\n" + std::string(100, 'x') + std::string(1, '\0') + "more";
  EXPECT_NE(refusal("image.txt", image).find("holds a NUL byte at offset 108"), std::string::npos);
  EXPECT_NE(refusal("image.txt.gz", gzip(image)).find("image.txt.gz holds a NUL byte at offset 108"),
            std::string::npos);
  EXPECT_EQ(refusal("bom8.txt", "\xEF\xBB\xBFtext"), "read: text");
  EXPECT_EQ(refusal("bom8-only.txt", "\xEF\xBB\xBF"), "read: ");
  EXPECT_EQ(refusal("bom8-blank.jsonl", "\xEF\xBB\xBF\r\n{\"text\": \"x\"}\r\n"), "read: {\"text\": \"x\"}\r");
  EXPECT_EQ(refusal("bom8.txt.gz", gzip("\xEF\xBB\xBFtext")), "read: text");
  // The conversion keeps the name's format (.txt would make JSON Lines text) and decompresses first (iconv of
  // gzip bytes is garbage).
  // Windows-1252 or Latin-1 text (before: every letter beyond ASCII trained on as U+FFFD by BPE, without a word),
  // and stray bytes in UTF-8 text, each with the iconv that fixes it; a character cut by the end of a gzip member
  // is not one of them, and the byte tokenizer's text is not checked (it keeps every byte).
  EXPECT_NE(
      refusal("latin1.txt", "caf\xE9 cr\xE8me\n")
          .find("latin1.txt is not UTF-8: the byte at offset 3 (0xE9, in \"caf\\xE9 cr\\xE8me\\x0A\") starts no "
                "UTF-8 sequence, and no letter beyond ASCII in its first 11 bytes is UTF-8. It looks like text in "
                "an 8-bit encoding such as Windows-1252 or Latin-1 (what Excel and older tools save), whose "
                "letters beyond ASCII the BPE tokenizer would read as U+FFFD. Convert it, e.g. `iconv -f "
                "WINDOWS-1252 -t UTF-8 " +
                (scratch / "latin1.txt").string() + " > " + (scratch / "latin1.utf8.txt").string() +
                "` (if UTF-8 letters come later in the file, drop the stray bytes instead: `iconv -f UTF-8 -t "
                "UTF-8 -c "),
      std::string::npos);
  EXPECT_NE(
      refusal("latin1b.txt", "caf\xE9").find("or prepare it with --tokenizer byte, which keeps every byte as it is"),
      std::string::npos);
  EXPECT_NE(refusal("excel.csv.gz", gzip("id,text\r\n1,\"\x93quoted\x94 na\xEFve\"\r\n"))
                .find("`zcat " + (scratch / "excel.csv.gz").string() + " | iconv -f WINDOWS-1252 -t UTF-8 > " +
                      (scratch / "excel.utf8.csv").string() + "`"),
            std::string::npos);
  EXPECT_NE(refusal("stray.txt", "caf\xC3\xA9 and a stray \xFF byte")
                .find("stray.txt is not UTF-8 throughout: the byte at offset 18 (0xFF, in \"caf\xC3\xA9 and a stray "
                      "\\xFF byte\") starts no UTF-8 sequence amid UTF-8 text, and the BPE tokenizer would read it as "
                      "U+FFFD. Drop such bytes, e.g. `iconv -f UTF-8 -t UTF-8 -c "),
            std::string::npos);
  EXPECT_EQ(refusal("members.txt.gz", gzip("caf\xC3") + gzip("\xA9 au lait")), "read: caf\xC3\xA9 au lait");
  // Audit round 12: a stray byte past the start looked at as the file opens (before: read as U+FFFD, silently),
  // in a later part of a text file (at its offset in the file) and in a later row of a table.
  const auto read_all = [&](const std::string& name, const std::string& bytes) -> std::string {
    write_text(scratch / name, bytes);
    try {
      const std::vector<CorpusFile> files = list_corpus_files({scratch / name}, scratch / "out");
      CorpusStream stream(files, "text", /*utf8_only=*/true);
      RawDocument document;
      std::size_t documents = 0;
      while (stream.next(document)) ++documents;
      return fmt::format("read {} documents", documents);
    } catch (const DataError& e) {
      return e.what();
    }
  };
  const std::string long_text = varied_text(600000, 3);  // past the first read (256 KiB) and many parts
  ASSERT_EQ(read_all("long.txt", long_text).rfind("read ", 0), 0u);
  std::string late = long_text;
  late[500000] = '\xFF';
  const std::string late_refusal = read_all("late.txt", late);
  EXPECT_NE(late_refusal.find("late.txt is not UTF-8 throughout: the byte at offset 500000 (0xFF, in \""),
            std::string::npos)
      << late_refusal;
  EXPECT_NE(read_all("late.txt.gz", gzip(late)).find("the byte at offset 500000 (0xFF"), std::string::npos);
  std::string rows = "id,text\n";
  for (int row = 1; row <= 20000; ++row) rows += fmt::format("{},row {} of the table\n", row, row);
  rows += "20001,na\xEFve\n";
  EXPECT_NE(read_all("late.csv", rows)
                .find("late.csv is not UTF-8 throughout: the byte at offset 2 of row 20001's "
                      "text (0xEF, in \"na\\xEFve\")"),
            std::string::npos)
      << read_all("late.csv", rows);
  write_text(scratch / "bytes.txt", "caf\xE9");
  const std::vector<CorpusFile> bytes = list_corpus_files({scratch / "bytes.txt"}, scratch / "out");
  CorpusStream kept(bytes, "text", /*utf8_only=*/false);
  RawDocument document;
  ASSERT_TRUE(kept.next(document));
  EXPECT_EQ(document.bytes, "caf\xE9");
  EXPECT_NE(refusal("u16.jsonl", "\xFF\xFE" + hello16)
                .find("`iconv -f UTF-16 -t UTF-8 " + (scratch / "u16.jsonl").string() + " > " +
                      (scratch / "u16.utf8.jsonl").string() + "`"),
            std::string::npos);
  EXPECT_NE(refusal("my u16.txt", "\xFF\xFE" + hello16)
                .find("`iconv -f UTF-16 -t UTF-8 '" + (scratch / "my u16.txt").string() + "' > '" +
                      (scratch / "my u16.utf8.txt").string() + "'`"),
            std::string::npos);
  EXPECT_NE(refusal("u16.csv.gz", gzip("\xFF\xFE" + hello16))
                .find("`zcat " + (scratch / "u16.csv.gz").string() + " | iconv -f UTF-16 -t UTF-8 > " +
                      (scratch / "u16.utf8.csv").string() + "`"),
            std::string::npos);

  // Formats a corpus often comes in are named with the step that makes them text: compressed data without its
  // extension, archives (a .tar.gz is decompressed, then found to be a tar archive), Parquet, Arrow.
  const std::string text = varied_text(20000, 5);
  EXPECT_NE(refusal("c4.json", gzip(text))
                .find("c4.json is gzip-compressed data, which loco does not read as text: "
                      "name it with .gz at the end"),
            std::string::npos);
  EXPECT_NE(refusal("a.txt", zstd_frame(text)).find("a.txt is zstd-compressed data"), std::string::npos);
  EXPECT_NE(refusal("a.jsonl", xz(text)).find("a.jsonl is xz-compressed data"), std::string::npos);
  EXPECT_NE(refusal("b.txt", bzip2(text)).find("b.txt is bzip2-compressed data"), std::string::npos);
  // A short name of a compressed tar archive is said to be one (before: "name it with .gz", then refused as tar).
  const std::string tgz = refusal("corpus.TGZ", gzip(text));
  EXPECT_NE(tgz.find("corpus.TGZ is gzip-compressed data named as a tar archive, which loco does not read as text: "
                     "unpack it (tar xf "),
            std::string::npos)
      << tgz;
  std::string tar(1024, '\0');
  tar.replace(0, 8, "doc.txt");
  tar.replace(257, 6, std::string("ustar\0", 6));
  EXPECT_NE(refusal("corpus.tar.gz", gzip(tar))
                .find("corpus.tar.gz is a tar archive, which loco does not read as "
                      "text: unpack it (tar xf)"),
            std::string::npos);
  EXPECT_NE(
      refusal("train.txt", std::string("PAR1\x15\x04\0\0", 8))
          .find("train.txt is a Parquet file, which loco does not read as text: name it with .parquet at the end"),
      std::string::npos);
  const std::string arrow_stream = test::read_text(fs::path(LOCO_FIXTURE_DIR) / "arrow/stream_utf8.arrow");
  EXPECT_NE(
      refusal("cache-1a2b", arrow_stream)
          .find("cache-1a2b is an Arrow stream, which loco does not read as text: name it with .arrow at the end"),
      std::string::npos);
  EXPECT_NE(refusal("data.ipc", test::read_text(fs::path(LOCO_FIXTURE_DIR) / "arrow/file_utf8.feather"))
                .find("data.ipc is an Arrow file, which loco does not read as text: name it with .arrow at the end"),
            std::string::npos);
  // Compressed twice: the fix decompresses once and keeps the inner compression's extension.
  EXPECT_NE(refusal("twice.txt.gz", gzip(gzip(text)))
                .find("twice.txt.gz is compressed twice: decompressed as .gz, it is gzip-compressed data again, "
                      "which loco does not read as text. Decompress it once (`zcat " +
                      (scratch / "twice.txt.gz").string() + " > " + (scratch / "twice.once.txt.gz").string() + "`)"),
            std::string::npos);
  EXPECT_NE(refusal("twice.jsonl.zst", zstd_frame(xz(text))).find("`zstdcat"), std::string::npos);
  // Text that holds a format's mark, without a NUL byte, is text.
  std::string gustar = std::string(254, 'a') + " gustar";
  EXPECT_EQ(refusal("es.txt", gustar), "read: " + gustar);
}

TEST(DataCorpusStream, AJsonLinesTextIsTheTopLevelFieldAndNothingElseIsKept) {
  ScratchDir scratch;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<std::string> lines = {
      R"({"meta": {"text": "nested"}, "text": "top", "after": [1, {"text": "x"}]})",
      R"({"text": "first", "text": "last"})",
      R"({"text": "caf\u00e9 \"quoted\"", "id": 7, "ok": true, "none": null, "x": 1.5})",
      "{\"pad\": " + deep + ", \"text\": \"after a deep array\"}",
      R"({"text": "a string", "text": 3})",
      R"(["text", "an array"])",
      R"({"text": "unclosed")",
      R"({"meta": {"text": "only nested"}})",
      R"({"text": null, "id": 9})",  // no document, as a null Parquet row (before: refused)
      R"({"text": "x", "text": null})",
  };
  std::string file;
  for (const auto& line : lines) file += line + "\n";
  write_text(scratch / "a.jsonl", file);
  const std::vector<CorpusFile> files = list_corpus_files({scratch / "a.jsonl"}, scratch / "out");
  CorpusStream stream(files, "text", /*utf8_only=*/true);
  std::vector<std::string> read;
  for (RawDocument document; stream.next(document);) {
    try {
      read.push_back(document_text(std::move(document), files, "text"));
    } catch (const DataError& e) {
      const std::string message = e.what();
      read.push_back(message.find("not valid JSON") != std::string::npos                    ? "invalid"
                     : message.find("no string \"text\" field") != std::string::npos        ? "no text"
                     : message.find("field is a number, not a string") != std::string::npos ? "a number"
                                                                                            : message);
    }
  }
  EXPECT_EQ(read, (std::vector<std::string>{"top", "last", "caf\xc3\xa9 \"quoted\"", "after a deep array", "a number",
                                            "no text", "invalid", "no text", "", ""}));
}

// What makes a line not JSON is said for what it is: lines ended by CR alone, bytes that are not UTF-8 (quoted escaped,
// not sent to the terminal); --text-field is named only where the text field is what is missing.
TEST(DataCorpusStream, AJsonLineThatIsNotJsonIsRefusedForWhatItIs) {
  ScratchDir scratch;
  const auto refusal = [&](const std::string& name, const std::string& content) {
    write_text(scratch / name, content);
    const std::vector<CorpusFile> files = list_corpus_files({scratch / name}, scratch / "out");
    CorpusStream stream(files, "text", /*utf8_only=*/true);
    try {
      for (RawDocument document; stream.next(document);) document_text(std::move(document), files, "text");
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string cr = refusal("cr.jsonl", "{\"text\": \"a\"}\r{\"text\": \"b\"}\r");
  EXPECT_NE(cr.find("lines may end with CR alone"), std::string::npos) << cr;
  // Past the start looked at before reading (utf8_text_check.h), bytes that are not UTF-8 are the parser's to name.
  const std::string latin1 = refusal(
      "latin1.jsonl", "{\"text\": \"" + std::string(kBinaryTestBytes, 'a') + "\"}\n{\"text\": \"bad \xff byte\"}\n");
  EXPECT_NE(latin1.find("\\xFF"), std::string::npos) << latin1;
  EXPECT_EQ(latin1.find('\xff'), std::string::npos) << latin1;
  const std::string nested = refusal("nested.jsonl", "{\"meta\": {\"text\": \"x\"}, \"id\": 1}\n");
  EXPECT_NE(nested.find("no string \"text\" field (its fields: \"meta\", \"id\")"), std::string::npos) << nested;
  EXPECT_NE(nested.find("never one nested inside another"), std::string::npos) << nested;
  const std::string array = refusal("array.jsonl", "{\"text\": [\"a\"]}\n");
  EXPECT_NE(array.find("its \"text\" field is an array, not a string"), std::string::npos) << array;
  EXPECT_NE(refusal("field.jsonl", "{\"body\": \"x\"}\n")
                .find("name the top-level field that holds the text with --text-field"),
            std::string::npos);
}

// Python's json.dumps writes NaN and Infinity for floats that are not finite and a surrogate escape alone for a
// string cut inside an emoji; Python reads both back, and a number beyond double's range, and so does loco: the
// literals and numbers as null (a field loco does not read), the lone surrogate as U+FFFD (before: each stopped
// prepare). A line that is not JSON for another reason is refused for that.
TEST(DataCorpusStream, WhatPythonsJsonWritesIsReadAsPythonReadsIt) {
  ScratchDir scratch;
  write_text(scratch / "py.jsonl",
             "{\"score\": NaN, \"text\": \"cut \\ud83d\", \"w\": [Infinity, -Infinity, 1e400]}\n"
             "{\"text\": \"NaN \\ud83d\\ude00\"}\n");
  write_text(scratch / "py.json", "[{\"score\": NaN, \"text\": \"\\udc00 array\"}]");
  write_text(scratch / "bad.jsonl", "{\"score\": NaN, \"text\": \"x\"\n");
  const auto read = [&](const std::string& name) {
    const std::vector<CorpusFile> files = list_corpus_files({scratch / name}, scratch / "out");
    CorpusStream stream(files, "text", /*utf8_only=*/true);
    std::vector<std::string> texts;
    for (RawDocument document; stream.next(document);)
      texts.push_back(document_text(std::move(document), files, "text"));
    return texts;
  };
  EXPECT_EQ(read("py.jsonl"), (std::vector<std::string>{"cut \xef\xbf\xbd", "NaN \xf0\x9f\x98\x80"}));
  EXPECT_EQ(read("py.json"), (std::vector<std::string>{"\xef\xbf\xbd array"}));
  try {
    read("bad.jsonl");
    ADD_FAILURE() << "an object member without a key was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unexpected end of input"), std::string::npos) << e.what();
    // Its column and quote are the rewritten line's, and it says so.
    EXPECT_NE(std::string(e.what()).find("column and quote as read with NaN"), std::string::npos) << e.what();
  }
}

// Note "text-parts": a text file longer than kTextPartBytes is cut into documents at a paragraph break once a
// part holds kTextPartBytes, at a line end at twice that, at a character boundary at four times; the parts,
// numbered from 0, put back together are the file (after a byte-order mark, which no part holds). A short file is one
// document, part 0, as it was.
TEST(DataCorpusStream, ALongTextFileIsCutIntoPartsThatPutBackTogetherAreTheFile) {
  ScratchDir scratch;
  std::string paragraphs, lines, unbroken, not_utf8(5 * kTextPartBytes, static_cast<char>(0x80));
  while (paragraphs.size() < 5 * kTextPartBytes) {
    paragraphs += varied_text(900 + paragraphs.size() % 700, static_cast<std::uint32_t>(paragraphs.size())) +
                  (paragraphs.size() % 3 ? "\n\n" : "\n\r\n");
  }
  while (lines.size() < 5 * kTextPartBytes) {
    std::string line = varied_text(100, static_cast<std::uint32_t>(lines.size()));
    std::replace(line.begin(), line.end(), '\n', ' ');
    lines += line + "\n";
  }
  while (unbroken.size() < 9 * kTextPartBytes) unbroken += "caf\xc3\xa9 \xe2\x82\xac";  // 2- and 3-byte characters
  const std::string short_text = "a short file\n\nof two paragraphs\n";
  write_text(scratch / "a.txt", paragraphs);
  write_text(scratch / "b.txt.gz", gzip(lines));
  write_text(scratch / "c.txt", unbroken);
  write_text(scratch / "d.txt", not_utf8);
  write_text(scratch / "e.txt", short_text);
  const std::vector<CorpusFile> files = list_corpus_files({scratch.path()}, scratch / "out");
  ASSERT_EQ(files.size(), 5u);
  std::vector<std::vector<std::string>> parts(files.size());
  CorpusStream stream(files, "text", /*utf8_only=*/false);  // bytes as the byte tokenizer reads them
  for (RawDocument document; stream.next(document);) {
    EXPECT_EQ(document.line, parts[document.file].size());
    const std::uint32_t file = document.file;
    parts[file].push_back(document_text(std::move(document), files, "text"));
  }
  const auto joined = [](const std::vector<std::string>& pieces) {
    std::string all;
    for (const auto& piece : pieces) all += piece;
    return all;
  };
  EXPECT_TRUE(joined(parts[0]) == paragraphs);
  EXPECT_TRUE(joined(parts[1]) == lines);
  EXPECT_TRUE(joined(parts[2]) == unbroken);
  EXPECT_TRUE(joined(parts[3]) == not_utf8);
  EXPECT_EQ(parts[4], std::vector<std::string>{short_text});
  for (std::size_t f = 0; f < 4; ++f) {
    ASSERT_GE(parts[f].size(), 2u) << f;
    for (std::size_t i = 0; i + 1 < parts[f].size(); ++i) {  // the last part is what remains
      const std::string& part = parts[f][i];
      EXPECT_GE(part.size(), kTextPartBytes) << f << " " << i;
      if (f == 0) {  // at a blank line
        EXPECT_LT(part.size(), kTextPartBytes + 2000) << i;
        const std::string end = part.substr(part.size() - 3);
        EXPECT_TRUE(end.substr(1) == "\n\n" || end == "\n\r\n") << i;
      }
      if (f == 1) {  // no blank line: at a line end
        EXPECT_GE(part.size(), 2 * kTextPartBytes) << i;
        EXPECT_LE(part.size(), 2 * kTextPartBytes + 100) << i;
        EXPECT_EQ(part.back(), '\n') << i;
      }
      if (f >= 2) {  // no line end: bounded
        EXPECT_LE(part.size(), 4 * kTextPartBytes + 3) << f << " " << i;
      }
      if (f == 2) {  // whole characters
        EXPECT_NE(static_cast<unsigned char>(parts[f][i + 1][0]) & 0xC0, 0x80) << i;
      }
    }
  }
}

// A JSONL line is held whole while it is read: one beyond 256 MiB (a file that lost its line ends) is refused,
// naming the file and line, instead of growing the buffer with it.
TEST(DataCorpusStream, AJsonlLineBeyondAnyDocumentIsRefused) {
  ScratchDir scratch;
  // Past the 8000 bytes in which a NUL byte makes a file binary, a sparse run of NUL bytes without a line end.
  write_text(scratch / "a.jsonl", "{\"text\": \"one\"}\n" + std::string(9000, 'x'));
  fs::resize_file(scratch / "a.jsonl", (std::uintmax_t{300} << 20));
  const std::vector<CorpusFile> files = list_corpus_files({scratch / "a.jsonl"}, scratch / "out");
  CorpusStream stream(files, "text", /*utf8_only=*/true);
  RawDocument document;
  ASSERT_TRUE(stream.next(document));
  try {
    stream.next(document);
    FAIL() << "a 300 MiB line was read";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("a.jsonl:2: a line longer than 256 MiB"), std::string::npos) << message;
  }
}

// The documents of `files` with their positions: the text of each, or "error: MESSAGE" for one refused.
std::vector<std::pair<std::uint64_t, std::string>> documents_of(const std::vector<CorpusFile>& files) {
  CorpusStream stream(files, "text", /*utf8_only=*/true);
  std::vector<std::pair<std::uint64_t, std::string>> read;
  for (RawDocument document; stream.next(document);) {
    const std::uint64_t line = document.line;
    try {
      read.emplace_back(line, document_text(std::move(document), files, "text"));
    } catch (const DataError& e) {
      read.emplace_back(line, std::string("error: ") + e.what());
    }
  }
  return read;
}

// A .json file is JSON Lines when it begins with '{' (C4's .json.gz files, `datasets`' to_json) and a JSON array
// of objects when it begins with '[' (after a byte-order mark and whitespace), each element a document numbered
// from 1. Before, both were read as one text document, their JSON syntax and all. Brackets, quotes and
// backslashes inside strings, and nested values, do not end an element.
TEST(DataCorpusStream, AJsonFileIsJsonLinesOrAnArrayOfDocumentsByItsFirstByte) {
  ScratchDir scratch;
  write_text(scratch / "c4.json.gz", gzip("{\"text\": \"line one\", \"url\": \"u\"}\n\n{\"text\": \"line two\"}\n"));
  write_text(
      scratch / "array.json",
      "\xEF\xBB\xBF \n [\n  {\"text\": \"a ] } [ { , \\\" \\\\\", \"meta\": {\"k\": [1, [2], {\"x\": \"]\"}]}},\n"
      "  {\"id\": 2, \"text\": \"second\"} ,{\"text\":\"third\"}, 7, \"text\"\n]\n\n");
  write_text(scratch / "records.ndjson", "{\"text\": \"nd\"}\n");
  write_text(scratch / "empty.json", " \n");
  write_text(scratch / "misnamed.jsonl", "[{\"text\": \"an array under a JSON Lines name\"}]");
  const std::vector<CorpusFile> files =
      list_corpus_files({scratch / "c4.json.gz", scratch / "array.json", scratch / "records.ndjson",
                         scratch / "empty.json", scratch / "misnamed.jsonl"},
                        scratch / "out");
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(files[0].format, CorpusFormat::json_lines);
  EXPECT_EQ(files[1].format, CorpusFormat::json_array);
  EXPECT_EQ(files[2].format, CorpusFormat::json_lines);
  EXPECT_EQ(files[3].format, CorpusFormat::json_lines);
  EXPECT_EQ(files[4].format, CorpusFormat::json_array);
  const auto read = documents_of(files);
  ASSERT_EQ(read.size(), 9u);
  using Document = std::pair<std::uint64_t, std::string>;
  EXPECT_EQ(read[0], (Document{1, "line one"}));
  EXPECT_EQ(read[1], (Document{3, "line two"}));
  EXPECT_EQ(read[2], (Document{1, "a ] } [ { , \" \\"}));
  EXPECT_EQ(read[3], (Document{2, "second"}));
  EXPECT_EQ(read[4], (Document{3, "third"}));
  // Elements that are not objects are named by their number.
  for (const std::size_t i : {5, 6}) {
    EXPECT_EQ(read[i].first, i - 1);
    EXPECT_NE(read[i].second.find(fmt::format("array.json element {}: no string \"text\" field", i - 1)),
              std::string::npos)
        << read[i].second;
  }
  EXPECT_EQ(read[7], (Document{1, "nd"}));
  EXPECT_EQ(read[8], (Document{1, "an array under a JSON Lines name"}));

  // Extensions in upper case name the same formats (before: G.JSONL was read as plain text, JSON syntax and all,
  // and B.JSONL.GZ refused as gzip data to be named .gz).
  write_text(scratch / "G.JSONL", "{\"text\": \"upper\"}\n");
  write_text(scratch / "B.JSONL.GZ", gzip("{\"text\": \"upper, compressed\"}\n"));
  write_text(scratch / "E.Csv", "text\ncsv upper\n");
  const std::vector<CorpusFile> upper =
      list_corpus_files({scratch / "G.JSONL", scratch / "B.JSONL.GZ", scratch / "E.Csv"}, scratch / "out");
  ASSERT_EQ(upper.size(), 3u);
  EXPECT_EQ(upper[0].format, CorpusFormat::json_lines);
  EXPECT_EQ(upper[1].format, CorpusFormat::json_lines);
  EXPECT_EQ(upper[2].format, CorpusFormat::csv);
  const auto upper_read = documents_of(upper);
  ASSERT_EQ(upper_read.size(), 3u);
  EXPECT_EQ(upper_read[0].second, "upper");
  EXPECT_EQ(upper_read[1].second, "upper, compressed");
  EXPECT_EQ(upper_read[2].second, "csv upper");

  // A .json file that is neither is refused when the corpus is listed, before anything is read.
  write_text(scratch / "string.json", "\"a string\"");
  try {
    list_corpus_files({scratch / "string.json"}, scratch / "out");
    FAIL() << "string.json was taken for a corpus file";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("string.json begins with '\"', but a .json corpus file is JSON Lines"),
              std::string::npos)
        << e.what();
  }
}

// Note "json-objects": a .json or .jsonl file whose first line is a lone '{' (json.dump(indent=4), one article
// per file; `jq '.[]'` without -c) holds pretty-printed objects, read one after another, numbered from 1 as the
// same objects one per line are (before: "not valid JSON" at its first line). A file of one line per object stays
// JSON Lines, and what breaks the sequence is refused by name.
TEST(DataCorpusStream, PrettyPrintedJsonObjectsAreReadOneAfterAnother) {
  ScratchDir scratch;
  write_text(scratch / "article.json", "\xEF\xBB\xBF{\n    \"id\": 7,\n    \"text\": \"Body.\\nPara. }\"\n}\n");
  write_text(scratch / "jq.jsonl",
             "{\n  \"text\": \"one\",\n  \"tags\": [\n    \"a\"\n  ]\n}\n{\n  \"text\": \"two\"\n}");
  write_text(scratch / "compact.jsonl", "{\"text\": \"one\", \"tags\": [\"a\"]}\n{\"text\": \"two\"}\n");
  write_text(scratch / "comma.json", "{\n \"text\": \"a\"\n},\n{\n \"text\": \"b\"\n}\n");
  write_text(scratch / "cut.json", "{\n \"text\": \"a\"\n}\n{\n \"text\": \"b\"\n");
  const auto listed = [&](const std::string& name) { return list_corpus_files({scratch / name}, scratch / "out"); };
  using Document = std::pair<std::uint64_t, std::string>;
  EXPECT_EQ(listed("article.json").at(0).format, CorpusFormat::json_objects);
  EXPECT_EQ(documents_of(listed("article.json")), (std::vector<Document>{{1, "Body.\nPara. }"}}));
  EXPECT_EQ(listed("compact.jsonl").at(0).format, CorpusFormat::json_lines);
  EXPECT_EQ(documents_of(listed("jq.jsonl")), documents_of(listed("compact.jsonl")));
  EXPECT_EQ(documents_of(listed("jq.jsonl")), (std::vector<Document>{{1, "one"}, {2, "two"}}));
  const auto refusal = [&](const std::string& name) {
    try {
      documents_of(listed(name));
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal("comma.json").find("comma.json: after object 1, ',' where the next object's '{' belongs"),
            std::string::npos)
      << refusal("comma.json");
  EXPECT_NE(refusal("cut.json").find("cut.json: object 2 ends without its closing '}'"), std::string::npos)
      << refusal("cut.json");
  // A bracket of the wrong kind is named in its object (before: it ended the object, and the next byte was
  // blamed); a byte that is not printable ASCII is named by its value (before: written raw to the terminal).
  write_text(scratch / "bracket.json", "{\n \"text\": \"a\"]}\n{\n \"text\": \"b\"\n}\n");
  EXPECT_NE(refusal("bracket.json").find("bracket.json: object 1 closes a '{' with a ']'"), std::string::npos)
      << refusal("bracket.json");
  write_text(scratch / "nbsp.json", "{\n \"text\": \"a\"\n}\xC2\xA0{\n \"text\": \"b\"\n}\n");
  EXPECT_NE(refusal("nbsp.json").find("after object 1, byte 0xC2 where"), std::string::npos) << refusal("nbsp.json");
}

// A JSON array file that is cut short, misses a comma, has a comma before its ']' or anything after it stops
// with the file and the element named; so does an element longer than any document (a string never closed:
// memory stays bounded).
TEST(DataCorpusStream, AJsonArrayFileThatIsNotWellFormedIsRefusedByName) {
  ScratchDir scratch;
  const std::map<std::string, std::string> broken = {
      {"cut.json", "[{\"text\": \"a\"}, {\"text\": \"b\"}"}, {"comma.json", "[{\"text\": \"a\"} {\"text\": \"b\"}]"},
      {"trailing.json", "[{\"text\": \"a\"},\n]"},           {"after.json", "[{\"text\": \"a\"}] {}"},
      {"open.json", "[{\"text\": \"a\"}, {\"text\": \"b"},
  };
  const std::map<std::string, std::string> expected = {
      {"cut.json", "cut.json: the array ends without its closing ']' after element 2"},
      {"comma.json", "comma.json: after element 1, '{' where a ',' or the closing ']' belongs"},
      {"trailing.json", "trailing.json: a ',' after element 1 and then the closing ']'"},
      {"after.json", "after.json: '{' after the array's closing ']'"},
      {"open.json", "open.json: the array ends without its closing ']' after element 1"},
  };
  for (const auto& [name, content] : broken) {
    write_text(scratch / name, content);
    const std::vector<CorpusFile> files = list_corpus_files({scratch / name}, scratch / "out");
    try {
      documents_of(files);
      FAIL() << name << " was read whole";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(expected.at(name)), std::string::npos) << e.what();
    }
  }
  // Past the 8000 bytes in which a NUL byte makes a file binary, a sparse run of NUL bytes inside a string.
  write_text(scratch / "long.json", "[{\"text\": \"one\"}, {\"text\": \"" + std::string(9000, 'x'));
  fs::resize_file(scratch / "long.json", (std::uintmax_t{300} << 20));
  try {
    documents_of(list_corpus_files({scratch / "long.json"}, scratch / "out"));
    FAIL() << "a 300 MiB element was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("long.json: element 2 is longer than 256 MiB"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loco::data
