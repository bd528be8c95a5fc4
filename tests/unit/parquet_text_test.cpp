// Parquet corpora (data/parquet_text.h, data/thrift_compact.h): the text column of files written by parquet-rs
// in each layout loco reads (tests/fixtures/parquet, made by tests/reference/make_parquet_fixtures.mjs), the
// errors that name what to do, and the Thrift reader's bounds on a stranger's bytes.
#include "loco/data/parquet_text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loco/data/corpus_files.h"
#include "loco/data/corpus_stream.h"
#include "loco/data/dataset_meta.h"
#include "loco/data/packed_integers.h"
#include "loco/data/parquet_encodings.h"
#include "loco/data/prepare.h"
#include "loco/data/thrift_compact.h"
#include "loco/util/error.h"
#include "support/table_fixtures.h"
#include "support/test_support.h"

namespace loco::data {
namespace {

using test::error_message;
using test::read_text;
using test::ScratchDir;
using test::write_text;

const fs::path kParquet = fs::path(LOCO_FIXTURE_DIR) / "parquet";

std::vector<std::optional<std::string>> fixture_texts() { return test::table_fixture_texts(kParquet); }

// Every layout parquet-rs writes a string column in: data pages v1 and v2; PLAIN, dictionary,
// DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY values; snappy, zstd, gzip, LZ4_RAW or no compression; an optional
// column (definition levels, nulls) and a required one. Each gives every non-null text, with its row number,
// in order, byte for byte.
TEST(ParquetText, EveryLayoutGivesTheColumnsTextsWithTheirRows) {
  const auto texts = fixture_texts();
  ASSERT_EQ(texts.size(), 600u);
  for (const char* name :
       {"snappy_v1_dictionary", "zstd_v2_delta_byte_array", "gzip_v1_plain", "uncompressed_v2_dictionary",
        "snappy_v1_delta_length", "snappy_v1_required", "lz4raw_v2_plain"}) {
    const bool required = std::string(name) == "snappy_v1_required";  // nulls written as ""
    const auto reader = open_parquet_text(kParquet / fmt::format("{}.parquet", name), "text");
    std::vector<std::pair<std::uint64_t, std::string>> read, expected;
    std::string text;
    for (std::uint64_t row = 0; reader->next(text, row);) read.emplace_back(row, text);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (texts[i] || required) expected.emplace_back(i + 1, texts[i].value_or(""));
    }
    EXPECT_EQ(read, expected) << name;
    EXPECT_EQ(reader->file_bytes_read(), fs::file_size(kParquet / fmt::format("{}.parquet", name))) << name;
  }
}

// A column that is not there, or holds no text, is named with the file's columns and the option that helps.
TEST(ParquetText, AColumnThatIsMissingOrNotTextIsNamed) {
  const fs::path file = kParquet / "gzip_v1_plain.parquet";
  EXPECT_NE(error_message([&] { open_parquet_text(file, "content"); })
                .find("gzip_v1_plain.parquet has no column 'content'; its columns are id, text. Name the one that "
                      "holds the text with --text-field"),
            std::string::npos);
  EXPECT_NE(
      error_message([&] { open_parquet_text(file, "id"); })
          .find("gzip_v1_plain.parquet: column 'id' holds numbers or other values (Parquet type 2), not text; name "
                "the column that holds the text with --text-field"),
      std::string::npos);
}

// A file cut short, one whose footer claims more than the file, and one whose pages are cut away are refused
// as damaged, naming the file.
TEST(ParquetText, ADamagedFileIsRefusedByName) {
  ScratchDir scratch;
  const std::string whole = read_text(kParquet / "snappy_v1_dictionary.parquet");
  write_text(scratch / "cut.parquet", whole.substr(0, whole.size() / 2));
  EXPECT_NE(error_message([&] {
              open_parquet_text(scratch / "cut.parquet", "text");
            }).find("cut.parquet: it does not begin and end with Parquet's mark PAR1; the Parquet file is damaged"),
            std::string::npos);
  std::string footer = whole;
  footer[footer.size() - 5] = '\x7F';  // the footer's length, little-endian, before the final PAR1
  write_text(scratch / "footer.parquet", footer);
  EXPECT_NE(error_message([&] { open_parquet_text(scratch / "footer.parquet", "text"); }).find("its footer claims"),
            std::string::npos);
  // The pages' bytes zeroed: the footer is whole, a page header is not.
  std::string pages = whole;
  std::fill(pages.begin() + 4, pages.begin() + static_cast<std::ptrdiff_t>(pages.size() / 2), '\0');
  write_text(scratch / "pages.parquet", pages);
  const std::string error = error_message([&] {
    const auto reader = open_parquet_text(scratch / "pages.parquet", "text");
    std::string text;
    for (std::uint64_t row = 0; reader->next(text, row);) {
    }
  });
  EXPECT_NE(error.find("pages.parquet: "), std::string::npos) << error;
  EXPECT_NE(error.find("damaged or was cut short"), std::string::npos) << error;
}

// A corpus's Parquet file is read through the corpus stream like any other: its non-blank texts, numbered by
// their rows, so that the same rows as JSON Lines (a blank line where a row is null) prepare to the same
// shards and tokenizer.
TEST(ParquetText, AParquetFileAndJsonLinesOfTheSameRowsPrepareTheSameShards) {
  ScratchDir scratch;
  fs::create_directories(scratch / "parquet");
  fs::copy_file(kParquet / "zstd_v2_delta_byte_array.parquet", scratch / "parquet/docs.parquet");
  const DatasetMeta from_lines =
      read_dataset_meta(test::expect_prepared_like_json_lines(scratch.path(), fixture_texts(), scratch / "parquet"));
  EXPECT_EQ(from_lines.train.documents + from_lines.val.documents, 563u);  // the non-blank texts
  EXPECT_GT(from_lines.val.documents, 0u);
  PrepareOptions options;
  options.inputs = {scratch / "parquet"};
  // --text-field names the column (a compressed .parquet is refused: ArrowText.ASavedDataset…).
  options.text_field = "body";
  options.out_dir = scratch / "no-column";
  EXPECT_NE(error_message([&] { prepare_dataset(options); }).find("has no column 'body'"), std::string::npos);
}

// The RLE / bit-packing hybrid by hand, width 1: a run of 3 repeats of 1 (header 3 << 1, value 0x01), then
// one bit-packed group (header 1 << 1 | 1) of 1,0,1,1,0,0,0,1 (lowest bit first: 0x8D); then the data ends.
TEST(ParquetEncodings, TheHybridDecoderReadsRunsAndBitPackedGroups) {
  HybridDecoder decoder(std::string("\x06\x01\x03\x8D", 4), 1);
  std::vector<std::uint32_t> values;
  for (std::uint32_t v = 0; decoder.next(v);) values.push_back(v);
  EXPECT_EQ(values, (std::vector<std::uint32_t>{1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 1}));
  // A run of a million repeats of 0 is skipped in one step, and the data ends where it says.
  HybridDecoder nulls(std::string("\x80\x89\x7A\x00", 4), 1);  // 1,000,000 << 1 as a varint, value 0
  std::uint32_t first = 9;
  ASSERT_TRUE(nulls.next(first));
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(nulls.skip_repeats(5'000'000), 999'999u);
  EXPECT_FALSE(nulls.next(first));
  // A bit-packed run longer than its bytes ends the values instead of reading past them.
  HybridDecoder short_run(std::string("\x05\xFF", 2), 8);  // 2 groups of 8 bytes announced, 1 there
  EXPECT_FALSE(short_run.next(first));
}

// DELTA_BINARY_PACKED by hand: 7, 5, 3, 1, 2, 3, 4, 5. Header: 128 values a block (0x80 0x01), 4 miniblocks,
// 8 values, first value 7 (zigzag 14). The deltas -2 -2 -2 1 1 1 1 are the minimum -2 (zigzag 3) plus
// 0 0 0 3 3 3 3, two bits each in the first miniblock (widths 2, 0, 0, 0): 0xC0 0x3F and six zero bytes.
// A minimum read with the wrong sign, or bits in the wrong order, gives other values.
TEST(ParquetEncodings, TheDeltaDecoderReadsBlocksOfMiniblocks) {
  const std::string bytes = std::string("\x80\x01\x04\x08\x0E", 5) + std::string("\x03\x02\x00\x00\x00", 5) +
                            std::string("\xC0\x3F", 2) + std::string(6, '\0') + "after";
  DeltaDecoder decoder(bytes);
  ASSERT_TRUE(decoder.valid());
  EXPECT_EQ(decoder.count(), 8u);
  EXPECT_EQ(decoder.end(), bytes.size() - 5);  // where "after" begins
  std::vector<std::int64_t> values;
  while (const auto v = decoder.next()) values.push_back(*v);
  EXPECT_EQ(values, (std::vector<std::int64_t>{7, 5, 3, 1, 2, 3, 4, 5}));
  // A header against the format's rules (a block of 100 values) is refused; a miniblock cut short ends it.
  EXPECT_FALSE(DeltaDecoder(std::string("\x64\x04\x08\x0E", 4)).valid());
  EXPECT_EQ(DeltaDecoder(bytes.substr(0, 12)).end(), std::nullopt);
}

// The shared integer readers: a varint of 300 (0xAC 0x02), zigzag signs, one that runs over 10 bytes.
TEST(ParquetEncodings, VarintsZigzagAndLittleEndianLengths) {
  std::size_t at = 0;
  EXPECT_EQ(read_varint(std::string("\xAC\x02!", 3), at), 300u);
  EXPECT_EQ(at, 2u);
  at = 0;
  EXPECT_EQ(read_varint(std::string(11, '\xFF'), at), std::nullopt);
  EXPECT_EQ(zigzag_decode(3), -2);
  EXPECT_EQ(zigzag_decode(4), 2);
  EXPECT_EQ(read_le32(std::string("\x01\x02\x00\x80", 4)), 0x80000201u);
  EXPECT_EQ(read_le32("abc"), std::nullopt);
}

// Thrift's compact protocol, by hand: a struct of an i32 (field 1), a binary (field 4, a delta of 3), an i32
// given by its id in full (field 20, header delta 0) and a nested struct holding a list of two i64.
TEST(ThriftCompact, ReadsFieldsByIdAndSkipsTheRest) {
  const std::string bytes = {
      0x15, 0x0A,                    // field 1, i32: zigzag 10 = 5
      0x38, 0x02, 'a', 'b',          // field 4 (1 + 3), binary "ab"
      0x05, 0x28, 0x01,              // field id 20 (zigzag 40), i32: zigzag 1 = -1
      0x1C,                          // field 21, struct
      0x19, 0x26, 0x04, 0x03,        //   field 1, list of 2 i64: 2, -2
      0x00,                          //   stop
      0x00};                         // stop
  ThriftReader reader(bytes);
  std::vector<std::string> seen;
  reader.read_struct([&](int id, std::uint8_t type) {
    if (id == 1 || id == 20) {
      seen.push_back(fmt::format("{}={}", id, reader.read_int(type)));
    } else if (id == 4) {
      seen.push_back(fmt::format("{}={}", id, reader.read_binary()));
    } else {
      seen.push_back(fmt::format("{} skipped", id));
      reader.skip(type);
    }
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"1=5", "4=ab", "20=-1", "21 skipped"}));
  EXPECT_EQ(reader.position(), bytes.size());
}

// What a stranger's bytes can claim is bounded: nesting past kMaxThriftDepth, a list of more elements than
// bytes, a string longer than the bytes, a varint of more than 10 bytes; and bytes that end early say so.
TEST(ThriftCompact, WhatTheBytesCannotHoldIsRefused) {
  const auto error = [](const std::string& bytes) -> std::string {
    try {
      ThriftReader reader(bytes);
      reader.skip(kThriftStruct);
    } catch (const ThriftError& e) {
      return std::string(e.what()) + (e.ended_early() ? " (early)" : "");
    }
    return "read";
  };
  EXPECT_EQ(error(std::string(100, '\x1C')), fmt::format("values nest more than {} deep", kMaxThriftDepth));
  EXPECT_EQ(error(std::string("\x19\xF5\xFF\xFF\xFF\xFF\x0F", 7)),
            "4294967295 elements or bytes announced where 0 bytes remain (early)");
  EXPECT_EQ(error(std::string("\x18\xFF\x01", 3)), "255 elements or bytes announced where 0 bytes remain (early)");
  EXPECT_EQ(error(std::string("\x15") + std::string(11, '\xFF')), "an integer of more than 10 bytes");
  EXPECT_EQ(error(std::string("\x15", 1)), "the bytes end in the middle of a value (early)");
  EXPECT_EQ(error(std::string("\x1D", 1)), "field 1 has the unknown type 13");
}

}  // namespace
}  // namespace loco::data
