// TokenDataset: one split over several memory-mapped shards, and what happens when it is damaged.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <numeric>

#include "loco/data/dataset_meta.h"
#include "loco/data/token_dataset.h"
#include "loco/util/directory_lock.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"
#include "unit/data_test_helpers.h"

namespace loco::data {
namespace {

using test::ScratchDir;

std::string open_error(const fs::path& dir, const std::string& split) {
  try {
    TokenDataset::open(dir, split);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(DataTokenDataset, CopiesAcrossShardBoundaries) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {5, 3, 7}, 4);
  TokenDataset train = TokenDataset::open(dir.path(), "train");
  EXPECT_EQ(train.size(), 15u);
  EXPECT_EQ(train.vocab_size(), 20u);
  std::vector<std::int64_t> all(15);
  train.copy_tokens(0, 15, all.data());
  std::vector<std::int64_t> expected(15);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected);
  std::vector<std::int64_t> spanning(6);
  train.copy_tokens(4, 6, spanning.data());  // last of shard 0, all of shard 1, first two of shard 2
  EXPECT_EQ(spanning, (std::vector<std::int64_t>{4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(TokenDataset::open(dir.path(), "val").size(), 4u);
}

TEST(DataTokenDataset, MissingDirectoryNamesTheFix) {
  ScratchDir dir;
  std::string error = open_error(dir / "absent", "train");
  EXPECT_NE(error.find("meta.json does not exist"), std::string::npos) << error;
  EXPECT_NE(error.find("loco prepare"), std::string::npos) << error;
}

// A directory loco did not write, with files in it, is a corpus given as data.dir, mostly: the fix prepares it into
// another directory (before: `loco prepare --out` into the corpus itself, which prepare refuses).
TEST(DataTokenDataset, ACorpusGivenAsDataIsToldToBePreparedElsewhere) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "corpus");
  test::write_text(dir / "corpus" / "a.jsonl", "{\"text\": \"x\"}\n");
  const std::string error = open_error(dir / "corpus/", "train");
  EXPECT_NE(error.find("loco prepare --input " + (dir / "corpus/").string() + " --out " + (dir / "corpus").string() +
                       "-prepared"),
            std::string::npos)
      << error;
}

// Audit round 12: data a prepare is writing right now (it holds the directory's lock) are said to be so (before:
// "run `loco prepare … --out` into it", which would race the prepare at work there).
TEST(DataTokenDataset, DataBeingPreparedAreToldToBeWaitedFor) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "data");
  test::write_text(dir / "data" / "train_000.bin.tmp", "");
  {
    const DirectoryLock preparing(dir / "data", "--out directory");
    const std::string error = open_error(dir / "data", "train");
    EXPECT_NE(error.find("is being prepared right now (a loco process holds it and has not written its meta.json "
                         "yet): wait for that `loco prepare` to finish"),
              std::string::npos)
        << error;
  }
  EXPECT_EQ(open_error(dir / "data", "train").find("being prepared"), std::string::npos);
}

TEST(DataTokenDataset, UnknownSplitIsADataError) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {5});
  EXPECT_NE(open_error(dir.path(), "test").find("unknown data split"), std::string::npos);
}

TEST(DataTokenDataset, MissingShardIsADataError) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {5, 5});
  std::filesystem::remove(dir / "train_001.bin");
  EXPECT_NE(open_error(dir.path(), "train").find("lacks its shard"), std::string::npos);
}

// What stands where a file belongs is named for what it is (a FIFO was "does not exist"), and a meta.json far
// beyond any loco writes is refused before it is parsed (300 MB took 1.7 GB).
TEST(DataTokenDataset, FilesThatAreNotFilesOrFarTooLargeAreNamed) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {5, 5});
  std::filesystem::remove(dir / "train_001.bin");
  std::filesystem::create_directory(dir / "train_001.bin");
  std::string error = open_error(dir.path(), "train");
  EXPECT_NE(error.find("train_001.bin, which is not a regular file"), std::string::npos) << error;
  std::filesystem::rename(dir / "meta.json", dir / "kept.json");
  ASSERT_EQ(::mkfifo((dir / "meta.json").c_str(), 0600), 0);
  error = open_error(dir.path(), "train");
  EXPECT_NE(error.find("meta.json is not a regular file"), std::string::npos) << error;
  std::filesystem::remove(dir / "meta.json");
  std::filesystem::copy_file(dir / "kept.json", dir / "meta.json");
  std::filesystem::resize_file(dir / "meta.json", std::uintmax_t{65} << 20);  // sparse: nothing written
  error = open_error(dir.path(), "train");
  EXPECT_NE(error.find("larger than 64 MiB"), std::string::npos) << error;
}

TEST(DataTokenDataset, TruncatedShardIsADataError) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {5, 5});
  std::filesystem::resize_file(dir / "train_001.bin", 32 + 2 * 4);
  EXPECT_NE(open_error(dir.path(), "train").find("truncated"), std::string::npos);
}

TEST(DataTokenDataset, CountDisagreeingWithMetaIsADataError) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {5, 5});
  DatasetMeta meta = read_dataset_meta(dir.path());
  meta.train.tokens = 11;
  write_dataset_meta(dir.path(), meta);
  EXPECT_NE(open_error(dir.path(), "train").find("meta.json says 11"), std::string::npos);
}

TEST(DataTokenDataset, MalformedMetaIsADataError) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {5});
  write_file_atomic(dir / "meta.json", "{\"format\": \"loco-tokens\"");
  EXPECT_NE(open_error(dir.path(), "train").find("malformed"), std::string::npos);
}

TEST(DataTokenDataset, TokenOutsideTheVocabularyIsADataError) {
  ScratchDir dir;
  test::write_positional_dataset(dir.path(), {10});
  DatasetMeta meta = read_dataset_meta(dir.path());
  meta.vocab_size = 8;
  write_dataset_meta(dir.path(), meta);
  TokenDataset train = TokenDataset::open(dir.path(), "train");
  std::vector<std::int64_t> out(10);
  train.copy_tokens(0, 8, out.data());
  EXPECT_THROW(train.copy_tokens(0, 10, out.data()), DataError);
}

}  // namespace
}  // namespace loco::data
