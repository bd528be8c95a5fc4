// Arrow IPC corpora (data/arrow_text.h, data/arrow_metadata.h): the text column of files written by Apache
// Arrow's JavaScript implementation in each layout loco reads (tests/fixtures/arrow, made by
// tests/reference/make_arrow_fixtures.mjs), a stream built by hand, the errors that name what to do, and what a
// stranger's bytes can do.
#include "loco/data/arrow_text.h"

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <lz4frame.h>
#include <zstd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loco/data/corpus_files.h"
#include "loco/data/dataset_meta.h"
#include "loco/data/prepare.h"
#include "loco/util/error.h"
#include "support/table_fixtures.h"
#include "support/test_support.h"

namespace loco::data {
namespace {

using test::error_message;
using test::read_text;
using test::ScratchDir;
using test::write_text;

const fs::path kArrow = fs::path(LOCO_FIXTURE_DIR) / "arrow";
// Written by Apache Arrow's JavaScript implementation (the first five) and by polars (the last two).
const char* const kLayouts[] = {"stream_utf8.arrow",     "stream_large_utf8.arrow",  "file_utf8.feather",
                                "file_large_utf8.arrow", "legacy_stream_utf8.arrow", "polars_view_lz4.arrow",
                                "polars_zstd.arrows"};

std::vector<std::optional<std::string>> fixture_texts() { return test::table_fixture_texts(kArrow); }

std::vector<std::pair<std::uint64_t, std::string>> read_all(ColumnTextReader& reader) {
  std::vector<std::pair<std::uint64_t, std::string>> read;
  std::string text;
  for (std::uint64_t row = 0; reader.next(text, row);) read.emplace_back(row, text);
  return read;
}

// The stream and the file format; Utf8, LargeUtf8 and Utf8View; lengths with and without the continuation
// marker; buffers uncompressed, LZ4-framed and zstd-compressed; columns of every kind of layout before the
// text (integers, a list, a struct, a dictionary, nulls), replacement dictionaries between the record batches,
// and an empty record batch. Each gives every non-null
// text, with its row number, in order, byte for byte.
TEST(ArrowText, EveryLayoutGivesTheColumnsTextsWithTheirRows) {
  const auto texts = fixture_texts();
  ASSERT_EQ(texts.size(), 600u);
  std::vector<std::pair<std::uint64_t, std::string>> expected;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (texts[i]) expected.emplace_back(i + 1, *texts[i]);
  }
  for (const char* name : kLayouts) {
    const auto reader = open_arrow_text(kArrow / name, "text");
    EXPECT_EQ(read_all(*reader), expected) << name;
    EXPECT_EQ(reader->file_bytes_read(), fs::file_size(kArrow / name)) << name;
  }
}

// A column that is not there, holds no text or is dictionary-encoded is named, with the file's columns and
// the option that helps.
TEST(ArrowText, AColumnThatIsMissingOrNotTextIsNamed) {
  const fs::path file = kArrow / "stream_utf8.arrow";
  EXPECT_NE(error_message([&] { open_arrow_text(file, "content"); })
                .find("stream_utf8.arrow has no column 'content'; its columns are id, tags, meta, lang, nothing, "
                      "text, score. Name the one that holds the text with --text-field"),
            std::string::npos);
  EXPECT_NE(error_message([&] { open_arrow_text(file, "id"); })
                .find("stream_utf8.arrow: column 'id' holds integers, not text (Utf8); name the column that holds "
                      "the text with --text-field"),
            std::string::npos);
  EXPECT_NE(error_message([&] { open_arrow_text(file, "meta"); }).find("column 'meta' holds a struct, not text"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              open_arrow_text(file, "lang");
            }).find("column 'lang' is dictionary-encoded, which loco does not read"),
            std::string::npos);
}

// Arrow IPC messages built by hand with FlatBuffers' builder, by the slot numbers of Arrow's Message.fbs and
// Schema.fbs (a field's voffset is 4 + 2 × its slot).
struct HandBuiltStream {
  static constexpr flatbuffers::voffset_t slot(int n) { return static_cast<flatbuffers::voffset_t>(4 + 2 * n); }
  struct TwoLongs {
    std::int64_t first, second;
  };

  std::string bytes;
  std::vector<std::size_t> starts;  // where each message begins in `bytes`

  // Appends a message: the continuation marker, the metadata's length (padded to 8 bytes), the metadata, the body.
  void add(std::uint8_t header_type,
           const std::function<flatbuffers::Offset<void>(flatbuffers::FlatBufferBuilder&)>& header,
           const std::string& body) {
    flatbuffers::FlatBufferBuilder fbb;
    const flatbuffers::Offset<void> h = header(fbb);
    const auto start = fbb.StartTable();
    fbb.AddElement<std::int16_t>(slot(0), 4, 0);  // MetadataVersion V5
    fbb.AddElement<std::uint8_t>(slot(1), header_type, 0);
    fbb.AddOffset(slot(2), h);
    fbb.AddElement<std::int64_t>(slot(3), static_cast<std::int64_t>(body.size()), 0);
    fbb.Finish(flatbuffers::Offset<flatbuffers::Table>(fbb.EndTable(start)));
    std::string metadata(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
    metadata.resize((metadata.size() + 7) / 8 * 8, '\0');
    const auto length = static_cast<std::uint32_t>(metadata.size());
    starts.push_back(bytes.size());
    bytes +=
        std::string("\xFF\xFF\xFF\xFF", 4) + std::string(reinterpret_cast<const char*>(&length), 4) + metadata + body;
  }

  // A schema of one nullable column "text" of type `type` (Utf8: 5), its values little- or big-endian.
  void schema(std::uint8_t type = 5, bool big_endian = false) {
    add(
        1, [&](flatbuffers::FlatBufferBuilder& fbb) { return schema_table(fbb, type, big_endian); }, "");
  }

  static flatbuffers::Offset<void> schema_table(flatbuffers::FlatBufferBuilder& fbb, std::uint8_t type,
                                                bool big_endian) {
    {
      const auto name = fbb.CreateString("text");
      const auto type_table = fbb.EndTable(fbb.StartTable());  // Utf8 and LargeUtf8 have no fields
      const auto children = fbb.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::Table>>{});
      auto start = fbb.StartTable();
      fbb.AddOffset(slot(0), name);
      fbb.AddElement<std::uint8_t>(slot(1), 1, 0);
      fbb.AddElement<std::uint8_t>(slot(2), type, 0);
      fbb.AddOffset(slot(3), flatbuffers::Offset<void>(type_table));
      fbb.AddOffset(slot(5), children);
      const auto field = flatbuffers::Offset<flatbuffers::Table>(fbb.EndTable(start));
      const auto fields = fbb.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::Table>>{field});
      start = fbb.StartTable();
      fbb.AddElement<std::int16_t>(slot(0), big_endian ? 1 : 0, 0);
      fbb.AddOffset(slot(1), fields);
      return flatbuffers::Offset<void>(fbb.EndTable(start));
    }
  }

  // The file format around the messages: "ARROW1", padding, the messages, a footer (the schema, and the record
  // batches at `batches`: indices into the messages), its length, "ARROW1".
  std::string file_format(const std::vector<std::size_t>& batches) const {
    struct Block {
      std::int64_t offset;
      std::int32_t metadata_length, padding;
      std::int64_t body_length;
    };
    flatbuffers::FlatBufferBuilder fbb;
    const auto schema = schema_table(fbb, 5, false);
    std::vector<Block> blocks;
    for (const std::size_t i : batches) blocks.push_back({8 + static_cast<std::int64_t>(starts[i]), 0, 0, 0});
    const auto block_vector = fbb.CreateVectorOfStructs(blocks.data(), blocks.size());
    const auto start = fbb.StartTable();
    fbb.AddElement<std::int16_t>(slot(0), 4, 0);
    fbb.AddOffset(slot(1), schema);
    fbb.AddOffset(slot(3), block_vector);
    fbb.Finish(flatbuffers::Offset<flatbuffers::Table>(fbb.EndTable(start)));
    const std::string footer(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
    const auto length = static_cast<std::uint32_t>(footer.size());
    return std::string("ARROW1\0\0", 8) + bytes + footer + std::string(reinterpret_cast<const char*>(&length), 4) +
           "ARROW1";
  }

  // A record batch of `rows` rows, `nulls` of them null, whose body is `body` holding the validity bits, the
  // offsets and the bytes at `buffers`; its buffers compressed with `codec` (0 LZ4_FRAME, 1 ZSTD) when given.
  void record_batch(std::int64_t rows, std::int64_t nulls, const std::vector<TwoLongs>& buffers,
                    const std::string& body, std::optional<std::int8_t> codec = std::nullopt) {
    add(
        3,
        [&](flatbuffers::FlatBufferBuilder& fbb) {
          const TwoLongs node{rows, nulls};
          const auto nodes = fbb.CreateVectorOfStructs(&node, 1);
          const auto spans = fbb.CreateVectorOfStructs(buffers.data(), buffers.size());
          flatbuffers::uoffset_t compression = 0;
          if (codec) {
            const auto start = fbb.StartTable();
            fbb.AddElement<std::int8_t>(slot(0), *codec, -1);  // written even where it is the default, 0
            compression = fbb.EndTable(start);
          }
          const auto start = fbb.StartTable();
          fbb.AddElement<std::int64_t>(slot(0), rows, 0);
          fbb.AddOffset(slot(1), nodes);
          fbb.AddOffset(slot(2), spans);
          if (codec) fbb.AddOffset(slot(3), flatbuffers::Offset<void>(compression));
          return flatbuffers::Offset<void>(fbb.EndTable(start));
        },
        body);
  }
};

// Rows "a", null, "bc" by hand: validity bits 1, 0, 1, lowest bit first (0x05); 32-bit offsets 0, 1, 1, 3;
// bytes "abc", each buffer padded to 8 bytes. The same as LargeUtf8 (64-bit offsets). Bits read from the
// other end, or offsets of the wrong width, give other rows.
TEST(ArrowText, AStreamBuiltByHandGivesItsRows) {
  ScratchDir scratch;
  const auto le32 = [](std::int32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const auto le64 = [](std::int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  const std::string validity = std::string("\x05", 1) + std::string(7, '\0');
  HandBuiltStream utf8;
  utf8.schema();
  utf8.record_batch(3, 1, {{0, 1}, {8, 16}, {24, 3}},
                    validity + le32(0) + le32(1) + le32(1) + le32(3) + "abc" + std::string(5, '\0'));
  write_text(scratch / "utf8.arrow", utf8.bytes + std::string(8, '\0') /* no continuation: a legacy end */);
  HandBuiltStream large;
  large.schema(20);
  large.record_batch(3, 1, {{0, 1}, {8, 32}, {40, 3}},
                     validity + le64(0) + le64(1) + le64(1) + le64(3) + "abc" + std::string(5, '\0'));
  large.bytes += std::string("\xFF\xFF\xFF\xFF\0\0\0\0", 8);  // the end-of-stream marker
  write_text(scratch / "large.arrow", large.bytes);
  const std::vector<std::pair<std::uint64_t, std::string>> expected{{1, "a"}, {3, "bc"}};
  for (const char* name : {"utf8.arrow", "large.arrow"}) {
    const auto reader = open_arrow_text(scratch / name, "text");
    EXPECT_EQ(read_all(*reader), expected) << name;
  }

  // The same rows compressed, each buffer alone: its decompressed length (8 bytes), then an LZ4 frame or a
  // zstd frame of it; the validity bits left uncompressed (length -1), as a writer may where compressing
  // does not pay.
  const auto compressed_stream = [&](std::int8_t codec, std::int64_t offsets_length) {
    const auto compress = [&](const std::string& raw, std::int64_t stated) {
      std::string out(std::max(LZ4F_compressFrameBound(raw.size(), nullptr), ZSTD_compressBound(raw.size())), '\0');
      const std::size_t size = codec == 0 ? LZ4F_compressFrame(out.data(), out.size(), raw.data(), raw.size(), nullptr)
                                          : ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
      out.resize(size);
      return le64(stated) + out;
    };
    std::vector<HandBuiltStream::TwoLongs> spans;
    std::string body;
    for (const std::string& buffer :
         {le64(-1) + "\x05", compress(le32(0) + le32(1) + le32(1) + le32(3), offsets_length), compress("abc", 3)}) {
      spans.push_back({static_cast<std::int64_t>(body.size()), static_cast<std::int64_t>(buffer.size())});
      body += buffer + std::string((8 - buffer.size() % 8) % 8, '\0');
    }
    HandBuiltStream stream;
    stream.schema();
    stream.record_batch(3, 1, spans, body, codec);
    write_text(scratch / "compressed.arrow", stream.bytes);
    return error_message([&] {
      const auto reader = open_arrow_text(scratch / "compressed.arrow", "text");
      EXPECT_EQ(read_all(*reader), expected) << int{codec};
    });
  };
  EXPECT_EQ(compressed_stream(0, 16), "");
  EXPECT_EQ(compressed_stream(1, 16), "");
  // A stated length that is not what the data decompresses to is damage, named.
  EXPECT_NE(compressed_stream(0, 20).find("compressed.arrow: a buffer does not decompress to its size with LZ4"),
            std::string::npos);
  EXPECT_NE(compressed_stream(1, 12).find("a buffer does not decompress to its size with zstd"), std::string::npos);

  // What loco does not read is named, with what to do.
  HandBuiltStream unknown;
  unknown.schema();
  unknown.record_batch(3, 1, {{0, 1}, {8, 16}, {24, 3}}, std::string(32, '\0'), 2);
  write_text(scratch / "unknown.arrow", unknown.bytes);
  EXPECT_NE(error_message([&] {
              const auto reader = open_arrow_text(scratch / "unknown.arrow", "text");
              read_all(*reader);
            }).find("unknown.arrow: its record batches are compressed in a way this reader does not know (codec 2"),
            std::string::npos);
  HandBuiltStream big_endian;
  big_endian.schema(5, true);
  write_text(scratch / "big.arrow", big_endian.bytes);
  EXPECT_NE(error_message([&] {
              open_arrow_text(scratch / "big.arrow", "text");
            }).find("big.arrow: its values are big-endian"),
            std::string::npos);

  // Offsets past the bytes, offsets that decrease, and buffers outside the body are damage, named.
  const auto damage = [&](const std::vector<HandBuiltStream::TwoLongs>& buffers, const std::string& body) {
    HandBuiltStream stream;
    stream.schema();
    stream.record_batch(3, 1, buffers, body);
    write_text(scratch / "damaged.arrow", stream.bytes);
    return error_message([&] {
      const auto reader = open_arrow_text(scratch / "damaged.arrow", "text");
      read_all(*reader);
    });
  };
  const std::string bytes = "abc" + std::string(5, '\0');
  EXPECT_NE(damage({{0, 1}, {8, 16}, {24, 3}}, validity + le32(0) + le32(1) + le32(1) + le32(4) + bytes)
                .find("damaged.arrow: an offset of column 'text' lies outside its bytes; the Arrow file is damaged"),
            std::string::npos);
  EXPECT_NE(damage({{0, 1}, {8, 16}, {24, 3}}, validity + le32(0) + le32(2) + le32(2) + le32(1) + bytes)
                .find("the offsets of column 'text' decrease"),
            std::string::npos);
  EXPECT_NE(damage({{0, 1}, {8, 16}, {24, 300}}, validity + le32(0) + le32(1) + le32(1) + le32(3) + bytes)
                .find("a buffer of column 'text' lies outside its record batch"),
            std::string::npos);
  EXPECT_NE(damage({{0, 1}, {8, 8}, {24, 3}}, validity + le32(0) + le32(1) + le32(1) + le32(3) + bytes)
                .find("has 1 bytes of validity bits and 8 of offsets"),
            std::string::npos);
  EXPECT_NE(damage({{0, 1}, {8, 16}}, validity + le32(0) + le32(1) + le32(1) + le32(3) + bytes)
                .find("a record batch has 2 buffers where its schema needs 3"),
            std::string::npos);
  HandBuiltStream many_rows;  // 2^61 rows: (rows + 1) × 8 bytes of offsets would wrap around
  many_rows.schema(20);
  many_rows.record_batch(std::int64_t{1} << 61, 0, {{0, 0}, {0, 32}, {32, 0}}, std::string(32, '\0'));
  write_text(scratch / "rows.arrow", many_rows.bytes);
  EXPECT_NE(error_message([&] {
              const auto reader = open_arrow_text(scratch / "rows.arrow", "text");
              read_all(*reader);
            }).find("a record batch claims 2305843009213693952 rows"),
            std::string::npos);

  // The file format: its footer gives the schema and the record batches (here the stream holds the schema
  // too, as pyarrow writes it); a footer naming one record batch twice is refused, not read twice.
  HandBuiltStream two_batches;
  two_batches.schema();
  const std::string body = validity + le32(0) + le32(1) + le32(1) + le32(3) + bytes;
  two_batches.record_batch(3, 1, {{0, 1}, {8, 16}, {24, 3}}, body);
  two_batches.record_batch(3, 1, {{0, 1}, {8, 16}, {24, 3}}, body);
  write_text(scratch / "file.arrow", two_batches.file_format({1, 2}));
  const auto file = open_arrow_text(scratch / "file.arrow", "text");
  EXPECT_EQ(read_all(*file),
            (std::vector<std::pair<std::uint64_t, std::string>>{{1, "a"}, {3, "bc"}, {4, "a"}, {6, "bc"}}));
  write_text(scratch / "again.arrow", two_batches.file_format({1, 2, 1}));
  EXPECT_NE(error_message([&] {
              const auto reader = open_arrow_text(scratch / "again.arrow", "text");
              read_all(*reader);
            }).find("again.arrow: its footer places a record batch at offset"),
            std::string::npos);
}

// A file cut short anywhere, or with any byte of its first messages changed, gives its rows or a DataError
// naming the file: never a crash, a hang or another error.
TEST(ArrowText, ADamagedFileGivesItsRowsOrADataErrorNamingIt) {
  ScratchDir scratch;
  for (const char* name : {"stream_utf8.arrow", "file_large_utf8.arrow"}) {
    const std::string whole = read_text(kArrow / name);
    std::vector<std::string> variants;
    for (std::size_t cut = 0; cut < whole.size(); cut += whole.size() / 61 + 1)
      variants.push_back(whole.substr(0, cut));
    for (std::size_t at = 0; at < std::min<std::size_t>(whole.size(), 2048); at += 3) {
      for (const char value : {'\0', '\xFF', '\x7F'}) {
        variants.push_back(whole);
        variants.back()[at] = value;
      }
    }
    int errors = 0;
    for (const std::string& variant : variants) {
      write_text(scratch / "damaged.arrow", variant);
      try {
        const auto reader = open_arrow_text(scratch / "damaged.arrow", "text");
        read_all(*reader);
      } catch (const DataError& e) {
        ++errors;
        EXPECT_NE(std::string(e.what()).find("damaged.arrow"), std::string::npos) << e.what();
      }
    }
    EXPECT_GT(errors, 100) << name;  // most changes are noticed
  }
}

// An Arrow file is read through the corpus stream like any other: a directory as `datasets`' save_to_disk
// writes it (a split's .arrow file with its state.json and dataset_info.json, dataset_dict.json above) is its
// rows, the description files skipped and said; the same rows as JSON Lines (a blank line where a row is null)
// prepare to the same shards and tokenizer. A compressed Arrow or Parquet file is refused by name.
TEST(ArrowText, ASavedDatasetAndJsonLinesOfTheSameRowsPrepareTheSameShards) {
  ScratchDir scratch;
  fs::create_directories(scratch / "arrow/train");
  fs::copy_file(kArrow / "stream_large_utf8.arrow", scratch / "arrow/train/data-00000-of-00001.arrow");
  write_text(scratch / "arrow/train/state.json", R"({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})");
  write_text(scratch / "arrow/train/dataset_info.json", "{\n  \"citation\": \"\"\n}");
  write_text(scratch / "arrow/dataset_dict.json", R"({"splits": ["train"]})");
  write_text(scratch / "elsewhere/state.json", "{\"text\": \"no table beside it: a JSON corpus\"}\n");
  std::vector<SkippedInput> skipped;
  const std::vector<CorpusFile> files =
      list_corpus_files({scratch / "arrow", scratch / "elsewhere"}, scratch / "out", &skipped);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].format, CorpusFormat::arrow);
  EXPECT_EQ(files[1].path, scratch / "elsewhere/state.json");
  std::vector<std::string> skipped_names;
  for (const SkippedInput& input : skipped) skipped_names.push_back(input.path.filename().string());
  EXPECT_EQ(skipped_names, (std::vector<std::string>{"dataset_dict.json", "dataset_info.json", "state.json"}));
  EXPECT_EQ(skipped[0].reason, "it describes the `datasets` table saved with it (the .arrow files hold its rows)");
  test::expect_prepared_like_json_lines(scratch.path(), fixture_texts(), scratch / "arrow");
  for (const char* kind : {"arrow", "parquet"}) {
    const std::string name = fmt::format("docs.{}.gz", kind);
    write_text(scratch / "gz" / name, "x");
    EXPECT_NE(error_message([&] { list_corpus_files({scratch / "gz" / name}, scratch / "out"); })
                  .find(fmt::format("{} is a compressed {} file: decompress it and give the .{} file", name,
                                    kind == std::string("arrow") ? "Arrow" : "Parquet", kind)),
              std::string::npos)
        << kind;
  }
}

// A Hugging Face dataset repository as downloaded: its dataset card (README.md) at the top, the tables in
// data/. The card is skipped and said; a README.md among text files is text like any other.
TEST(ArrowText, ADatasetCardIsSkippedOnlyAtTheTopOfADirectoryOfTables) {
  ScratchDir scratch;
  write_text(scratch / "repo/README.md", "---\nlicense: cc-by-4.0\n---\n# A dataset\n");
  fs::create_directories(scratch / "repo/data");
  fs::copy_file(kArrow / "stream_utf8.arrow", scratch / "repo/data/train-00000-of-00001.arrow");
  write_text(scratch / "texts/README.md", "a text like the others\n");
  write_text(scratch / "texts/a.txt", "a text\n");
  for (const std::string input : {"repo", "repo/"}) {
    std::vector<SkippedInput> skipped;
    const std::vector<CorpusFile> files = list_corpus_files({scratch / input}, scratch / "out", &skipped);
    ASSERT_EQ(files.size(), 1u) << input;
    EXPECT_EQ(files[0].path.filename(), "train-00000-of-00001.arrow");
    ASSERT_EQ(skipped.size(), 1u) << input;
    EXPECT_EQ(skipped[0].path.filename(), "README.md");
    EXPECT_EQ(skipped[0].reason,
              "it is the dataset card of the tables under it (name it in --input to read it as text)");
  }
  std::vector<SkippedInput> skipped;
  EXPECT_EQ(list_corpus_files({scratch / "texts"}, scratch / "out", &skipped).size(), 2u);
  EXPECT_TRUE(skipped.empty());
}

}  // namespace
}  // namespace loco::data
