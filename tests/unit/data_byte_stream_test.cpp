// ByteStream (`loco prepare`'s reading of compressed files): gzip, zstd, xz and bzip2, concatenated members,
// padding, truncation and corruption, and files whose bytes do not begin as their name says.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <tuple>

#include "loco/data/byte_stream.h"
#include "loco/util/error.h"
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

std::string read_stream(const fs::path& path) {
  ByteStream stream(path);
  return read_all(stream);
}

std::string error_of(const fs::path& path) {
  try {
    read_stream(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DataByteStream, DecodesGzipAndZstdIncludingConcatenatedMembersAndFrames) {
  ScratchDir scratch;
  const std::string a = varied_text(3 << 20, 1), b = varied_text(100000, 2);
  write_text(scratch / "plain.txt", a);
  write_text(scratch / "one.txt.gz", gzip(a));
  write_text(scratch / "two.txt.gz", gzip(a) + gzip(b));  // what `cat a.gz b.gz` makes
  write_text(scratch / "one.txt.zst", zstd_frame(a));
  write_text(scratch / "two.txt.zst", zstd_frame(a) + zstd_frame(b));
  EXPECT_EQ(read_stream(scratch / "plain.txt"), a);
  EXPECT_EQ(read_stream(scratch / "one.txt.gz"), a);
  EXPECT_EQ(read_stream(scratch / "two.txt.gz"), a + b);
  EXPECT_EQ(read_stream(scratch / "one.txt.zst"), a);
  EXPECT_EQ(read_stream(scratch / "two.txt.zst"), a + b);

  ByteStream stream(scratch / "one.txt.zst");
  read_all(stream);
  EXPECT_EQ(stream.file_bytes_read(), fs::file_size(scratch / "one.txt.zst"));
}

// Zero bytes after the last member (tar's and block devices' padding) are no data, as gzip reads them (they
// were refused as a damaged download); other bytes after a member are named as appended, not as a cut file.
TEST(DataByteStream, ZeroPaddingAfterTheLastGzipMemberOrBzip2StreamIsSkipped) {
  ScratchDir scratch;
  const std::string a = varied_text(300000, 5), b = varied_text(1000, 6);
  // bzip2 as gzip since audit round 11 (before: "not valid bzip2 data (libbz2 error -5)… cut short").
  for (const auto& [name, compress, unit] :
       std::vector<std::tuple<std::string, std::function<std::string(const std::string&)>, std::string>>{
           {"gz", gzip, "gzip member"}, {"bz2", bzip2, "bzip2 stream"}}) {
    const fs::path padded = scratch / ("padded.txt." + name);
    write_text(padded, compress(a) + std::string(1 << 17, '\0'));
    EXPECT_EQ(read_stream(padded), a) << name;
    const fs::path between = scratch / ("between.txt." + name);
    write_text(between, compress(a) + std::string(100, '\0') + compress(b) + std::string(3, '\0'));
    EXPECT_EQ(read_stream(between), a + b) << name;
    const fs::path appended = scratch / ("appended.txt." + name);
    write_text(appended, compress(a) + std::string(10, '\0') + "trailer");
    const std::string error = error_of(appended);
    EXPECT_NE(error.find("appended.txt." + name + ": after a whole " + unit +
                         " and 10 zero bytes the file holds "
                         "bytes that are not " +
                         unit.substr(0, unit.find(' ')) + " data (from byte " +
                         std::to_string(compress(a).size() + 10) + " on): something was appended"),
              std::string::npos)
        << error;
  }
}

TEST(DataByteStream, DecodesXzAndBzip2IncludingConcatenatedStreams) {
  ScratchDir scratch;
  const std::string a = varied_text(3 << 20, 1), b = varied_text(100000, 2);
  write_text(scratch / "one.txt.xz", xz(a));
  write_text(scratch / "two.txt.xz", xz(a) + xz(b));  // what `cat a.xz b.xz` makes
  write_text(scratch / "one.txt.bz2", bzip2(a));
  write_text(scratch / "two.txt.bz2", bzip2(a) + bzip2(b));  // what pbzip2 makes
  EXPECT_EQ(read_stream(scratch / "one.txt.xz"), a);
  EXPECT_EQ(read_stream(scratch / "two.txt.xz"), a + b);
  EXPECT_EQ(read_stream(scratch / "one.txt.bz2"), a);
  EXPECT_EQ(read_stream(scratch / "two.txt.bz2"), a + b);
  for (const char* name : {"two.txt.xz", "two.txt.bz2"}) {
    ByteStream stream(scratch / name);
    read_all(stream);
    EXPECT_EQ(stream.file_bytes_read(), fs::file_size(scratch / name)) << name;
  }
}

// An xz file whose block asks for a 1 GiB dictionary (its header edited, its CRC-32 made right again) is
// refused before the decoder allocates it: a stranger's file does not choose how much memory prepare takes.
TEST(DataByteStream, AnXzFileAskingForAHugeDictionaryIsRefused) {
  ScratchDir scratch;
  std::string file = xz(varied_text(1000, 4));
  // The block header follows the 12-byte stream header: its size, its flags, the sizes the flags announce
  // (variable-length integers), then the LZMA2 filter (id 0x21, 1 byte of properties: the dictionary size).
  const std::size_t header = 12, header_size = (static_cast<unsigned char>(file[header]) + 1) * 4;
  const auto flags = static_cast<unsigned char>(file[header + 1]);
  std::size_t at = header + 2;
  const auto skip_varint = [&] {
    while (static_cast<unsigned char>(file[at++]) & 0x80) {
    }
  };
  if (flags & 0x40) skip_varint();
  if (flags & 0x80) skip_varint();
  ASSERT_EQ(static_cast<unsigned char>(file[at]), 0x21);  // LZMA2
  ASSERT_EQ(static_cast<unsigned char>(file[at + 1]), 0x01);
  file[at + 2] = 36;  // 2 << (36 / 2 + 11): 1 GiB
  const auto crc = static_cast<std::uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(file.data() + header), static_cast<uInt>(header_size - 4)));
  for (int i = 0; i < 4; ++i) file[header + header_size - 4 + i] = static_cast<char>(crc >> (8 * i));
  write_text(scratch / "huge.txt.xz", file);
  const std::string error = error_of(scratch / "huge.txt.xz");
  EXPECT_NE(error.find("huge.txt.xz: decoding this xz data needs more than 512 MiB"), std::string::npos) << error;
}

TEST(DataByteStream, TruncatedOrCorruptCompressedFilesNameTheFile) {
  ScratchDir scratch;
  const std::string a = varied_text(1 << 20, 3);
  const std::string gz = gzip(a), zst = zstd_frame(a), x = xz(a), bz = bzip2(a);
  write_text(scratch / "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  write_text(scratch / "cut.jsonl.zst", zst.substr(0, zst.size() / 2));
  write_text(scratch / "cut.jsonl.xz", x.substr(0, x.size() / 2));
  write_text(scratch / "cut.jsonl.bz2", bz.substr(0, bz.size() / 2));
  write_text(scratch / "bad.jsonl.xz", std::string("\xFD"
                                                   "7zXZ\0 not xz after its mark",
                                                   26));
  write_text(scratch / "bad.jsonl.bz2", "BZh9 not bzip2 either");
  write_text(scratch / "empty.jsonl.xz", "");
  write_text(scratch / "empty.jsonl.bz2", "");
  std::string bad = gz;
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x55);
  write_text(scratch / "bad.jsonl.gz", bad);
  write_text(scratch / "bad.jsonl.zst", "\x28\xB5\x2F\xFD not zstd after its mark");
  write_text(scratch / "empty.jsonl.gz", "");  // what a failed download leaves; even empty content has a header
  write_text(scratch / "empty.jsonl.zst", "");
  for (const char* name :
       {"cut.jsonl.gz", "cut.jsonl.zst", "cut.jsonl.xz", "cut.jsonl.bz2", "bad.jsonl.gz", "bad.jsonl.zst",
        "bad.jsonl.xz", "bad.jsonl.bz2", "empty.jsonl.gz", "empty.jsonl.zst", "empty.jsonl.xz", "empty.jsonl.bz2"}) {
    const std::string error = error_of(scratch / name);
    EXPECT_NE(error.find(name), std::string::npos) << name << ": " << error;
    EXPECT_NE(error.find("damaged or was cut short"), std::string::npos) << name << ": " << error;
  }
  EXPECT_NE(error_of(scratch / "cut.jsonl.gz").find("ends in the middle"), std::string::npos);
  EXPECT_NE(error_of(scratch / "cut.jsonl.zst").find("ends in the middle"), std::string::npos);
  EXPECT_NE(error_of(scratch / "cut.jsonl.xz").find("ends in the middle"), std::string::npos);
  EXPECT_NE(error_of(scratch / "cut.jsonl.bz2").find("ends in the middle"), std::string::npos);
  EXPECT_NE(error_of(scratch / "empty.jsonl.gz").find("the file is empty"), std::string::npos);
  // An empty plain file is an empty document, not an error.
  write_text(scratch / "empty.txt", "");
  EXPECT_EQ(read_stream(scratch / "empty.txt"), "");
}

// A file whose first bytes are not its compression's is not taken for a damaged download: plain text named
// .gz is said to be so (before: "not valid gzip data (incorrect header check) … fetch it again"). A zstd file
// may begin with a skippable frame (pzstd writes one first).
TEST(DataByteStream, AFileThatDoesNotBeginAsItsCompressionIsSaidSo) {
  ScratchDir scratch;
  for (const auto& [name, format] : std::map<std::string, std::string>{
           {"plain.txt.gz", "gzip"}, {"plain.txt.zst", "zstd"}, {"plain.txt.xz", "xz"}, {"plain.txt.bz2", "bzip2"}}) {
    write_text(scratch / name, "just text, not compressed\n");
    const std::string error = error_of(scratch / name);
    const std::string extension = fs::path(name).extension().string();
    EXPECT_NE(error.find(fmt::format("{} is named {} but does not hold {} data", name, extension, format)),
              std::string::npos)
        << error;
    EXPECT_NE(error.find(fmt::format("if it is plain text, rename it without {}", extension)), std::string::npos)
        << error;
  }
  const std::string skippable = std::string("\x50\x2A\x4D\x18\x04\0\0\0abcd", 12);
  write_text(scratch / "pzstd.txt.zst", skippable + zstd_frame("after a skippable frame\n"));
  EXPECT_EQ(read_stream(scratch / "pzstd.txt.zst"), "after a skippable frame\n");
}

}  // namespace
}  // namespace loco::data
