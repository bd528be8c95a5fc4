// Token shard files: exact format, round trips, and corrupted files.
#include <gtest/gtest.h>

#include <cstring>

#include "loco/data/shard.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"

namespace loco::data {
namespace {

using test::ScratchDir;

void write_shard(const fs::path& path, const std::vector<std::uint32_t>& tokens, std::uint32_t bpt) {
  ShardWriter writer(path, bpt);
  writer.append(tokens.data(), tokens.size());
  writer.finish();
}

std::vector<std::int64_t> read_all(const ShardReader& reader) {
  std::vector<std::int64_t> out(reader.count());
  reader.copy(0, reader.count(), out.data());
  return out;
}

// The error a reader throws for `path`, or "" if it opens.
std::string open_error(const fs::path& path) {
  try {
    ShardReader reader(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(DataShard, BytesPerTokenFollowsTheVocabulary) {
  EXPECT_EQ(bytes_per_token_for(258), 2u);
  EXPECT_EQ(bytes_per_token_for(65536), 2u);
  EXPECT_EQ(bytes_per_token_for(65537), 4u);
  EXPECT_EQ(shard_file_name("train", 7), "train_007.bin");
}

TEST(DataShard, Uint16RoundTrip) {
  ScratchDir dir;
  std::vector<std::uint32_t> tokens{0, 1, 257, 40000, 65535};
  write_shard(dir / "a.bin", tokens, 2);
  ShardReader reader(dir / "a.bin");
  EXPECT_EQ(reader.bytes_per_token(), 2u);
  EXPECT_EQ(reader.count(), tokens.size());
  EXPECT_EQ(read_all(reader), (std::vector<std::int64_t>{0, 1, 257, 40000, 65535}));
  std::int64_t middle[2];
  reader.copy(2, 2, middle);
  EXPECT_EQ(middle[0], 257);
  EXPECT_EQ(middle[1], 40000);
}

TEST(DataShard, Uint32RoundTrip) {
  ScratchDir dir;
  write_shard(dir / "a.bin", {70000, 3, 4294967295u}, 4);
  ShardReader reader(dir / "a.bin");
  EXPECT_EQ(reader.bytes_per_token(), 4u);
  EXPECT_EQ(read_all(reader), (std::vector<std::int64_t>{70000, 3, 4294967295LL}));
}

// The layout other tools (the Python benchmark) read: keep it byte for byte.
TEST(DataShard, HeaderLayoutIsExact) {
  ScratchDir dir;
  write_shard(dir / "a.bin", {0x1234, 0xBEEF}, 2);
  std::string bytes = read_file(dir / "a.bin");
  ASSERT_EQ(bytes.size(), 32u + 2 * 2);
  EXPECT_EQ(bytes.substr(0, 8), "LOCOTOK1");
  auto u32 = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  auto u64 = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  EXPECT_EQ(u32(8), 1u);
  EXPECT_EQ(u32(12), 2u);
  EXPECT_EQ(u64(16), 2u);
  EXPECT_EQ(u64(24), 0u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[32]), 0x34);  // little-endian
  EXPECT_EQ(static_cast<unsigned char>(bytes[33]), 0x12);
}

TEST(DataShard, EmptyShardIsValid) {
  ScratchDir dir;
  write_shard(dir / "a.bin", {}, 2);
  EXPECT_EQ(ShardReader(dir / "a.bin").count(), 0u);
}

TEST(DataShard, TruncatedShardIsADataError) {
  ScratchDir dir;
  write_shard(dir / "a.bin", {1, 2, 3, 4}, 2);
  std::filesystem::resize_file(dir / "a.bin", 32 + 3 * 2);
  std::string error = open_error(dir / "a.bin");
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  EXPECT_NE(error.find((dir / "a.bin").string()), std::string::npos) << error;
  EXPECT_NE(error.find("loco prepare"), std::string::npos) << error;

  std::filesystem::resize_file(dir / "a.bin", 10);
  EXPECT_NE(open_error(dir / "a.bin").find("truncated"), std::string::npos);
}

TEST(DataShard, BadMagicIsADataError) {
  ScratchDir dir;
  write_shard(dir / "a.bin", {1, 2}, 2);
  std::string bytes = read_file(dir / "a.bin");
  bytes[0] = 'X';
  write_file_atomic(dir / "a.bin", bytes);
  EXPECT_NE(open_error(dir / "a.bin").find("not a loco token shard"), std::string::npos);
}

TEST(DataShard, BadVersionAndDtypeAreDataErrors) {
  ScratchDir dir;
  write_shard(dir / "a.bin", {1, 2}, 2);
  std::string good = read_file(dir / "a.bin");
  std::string bad_version = good;
  bad_version[8] = 2;
  write_file_atomic(dir / "v.bin", bad_version);
  EXPECT_NE(open_error(dir / "v.bin").find("version 2"), std::string::npos);
  std::string bad_dtype = good;
  bad_dtype[12] = 3;
  write_file_atomic(dir / "d.bin", bad_dtype);
  EXPECT_NE(open_error(dir / "d.bin").find("3 bytes per token"), std::string::npos);
}

TEST(DataShard, UnfinishedWriterLeavesNoFile) {
  ScratchDir dir;
  {
    ShardWriter writer(dir / "a.bin", 2);
    std::uint32_t token = 5;
    writer.append(&token, 1);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(DataShard, SplitWriterRollsOverAtTheShardLimit) {
  ScratchDir dir;
  SplitWriter writer(dir.path(), "train", 2, 4);
  writer.append({0, 1, 2});
  writer.append({3, 4, 5, 6, 7, 8, 9});
  std::vector<std::string> names = writer.finish();
  ASSERT_EQ(names, (std::vector<std::string>{"train_000.bin", "train_001.bin", "train_002.bin"}));
  EXPECT_EQ(read_all(ShardReader(dir / names[0])), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(read_all(ShardReader(dir / names[1])), (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(read_all(ShardReader(dir / names[2])), (std::vector<std::int64_t>{8, 9}));
  // The checksums computed while writing are those of the files as they lie on disk.
  ASSERT_EQ(writer.checksums().size(), 3u);
  for (const auto& name : names) EXPECT_EQ(writer.checksums().at(name), crc32_hex_of_file(dir / name)) << name;
}

TEST(DataShard, EmptySplitStillHasOneShard) {
  ScratchDir dir;
  SplitWriter writer(dir.path(), "val", 2, 4);
  EXPECT_EQ(writer.finish(), std::vector<std::string>{"val_000.bin"});
  EXPECT_EQ(ShardReader(dir / "val_000.bin").count(), 0u);
  EXPECT_EQ(writer.checksums().at("val_000.bin"), crc32_hex_of_file(dir / "val_000.bin"));
}

}  // namespace
}  // namespace loco::data
