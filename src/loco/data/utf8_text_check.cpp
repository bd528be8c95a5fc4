#include "loco/data/utf8_text_check.h"

#include <fmt/format.h>

#include <array>
#include <functional>
#include <string>
#include <string_view>

#include "loco/data/byte_stream.h"
#include "loco/util/error.h"
#include "loco/util/utf8.h"

namespace loco::data {

namespace {

// Binary formats a corpus often comes in are named, with the step that makes them text: compressed data under a
// name without its extension, archives, and the columnar files of Hugging Face datasets.
struct KnownBinaryFormat {
  std::string_view magic;
  std::size_t offset;
  const char* what;
  const char* fix;
};
// The compression formats loco decompresses are told by byte_stream.h's compression_marked.
constexpr std::array<KnownBinaryFormat, 6> kKnownBinaryFormats{{
    {std::string_view("PK\x03\x04", 4), 0, "a zip archive", "unpack it (unzip) and give its files or directory"},
    {std::string_view("ustar", 5), 257, "a tar archive", "unpack it (tar xf) and give its files or directory"},
    {std::string_view("7z\xBC\xAF\x27\x1C", 6), 0, "a 7-Zip archive",
     "unpack it (7z x) and give its files or directory"},
    {std::string_view("PAR1", 4), 0, "a Parquet file",
     "name it with .parquet at the end, and loco reads its text column"},
    {std::string_view("ARROW1", 6), 0, "an Arrow file",
     "name it with .arrow at the end, and loco reads its text column"},
    // The stream format's first message length, after its continuation marker (no UTF-8 text has byte 0xFF).
    {std::string_view("\xFF\xFF\xFF\xFF", 4), 0, "an Arrow stream",
     "name it with .arrow at the end, and loco reads its text column"},
}};

// `path` as one shell word, for a command to copy: as it is when it holds only characters no shell reads
// specially, else in single quotes.
std::string shell_word(const fs::path& path) {
  const std::string text = path.string();
  constexpr std::string_view kPlain = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/+-=,:@%";
  if (!text.empty() && text.find_first_not_of(kPlain) == std::string::npos) return text;
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Whether `path` has a short name of a compressed tar archive (a.tgz); a.tar.gz is named by its decompressed bytes.
bool is_compressed_tar_name(const fs::path& path) {
  const std::string extension = file_extension(path);
  for (const std::string_view tar : {".tgz", ".taz", ".tbz", ".tbz2", ".txz", ".tzst"}) {
    if (extension == tar) return true;
  }
  return false;
}

// The command that converts `path` with `iconv ARGUMENTS` into a file beside it, keeping the name's format
// extension (u16.jsonl -> u16.utf8.jsonl: .txt would make JSON Lines text). A compressed file is decompressed on
// the way: iconv of compressed bytes is garbage.
std::string conversion_command(const fs::path& path, const std::string& iconv_arguments) {
  const fs::path plain = without_compression_extension(path);
  const fs::path converted = fs::path(plain).replace_extension(".utf8" + plain.extension().string());
  const CompressionFormat* compressed = compression_format(compression_of(path));
  return compressed == nullptr
             ? fmt::format("iconv {} {} > {}", iconv_arguments, shell_word(path), shell_word(converted))
             : fmt::format("{} {} | iconv {} > {}", compressed->decompressor, shell_word(path), iconv_arguments,
                           shell_word(converted));
}

}  // namespace

namespace {

constexpr const char* kByteTokenizer = "or prepare it with --tokenizer byte, which keeps every byte as it is";

// The bytes of `text` around its byte `at`, printable: ill-formed ones and control characters (a line end) as \xNN.
std::string context_of(std::string_view text, std::size_t at) {
  const std::size_t from = at > 20 ? at - 20 : 0;
  return quoted_bytes(text.substr(from), at - from + 20);
}

DataError stray_byte(const fs::path& path, std::string_view text, std::size_t at, const std::string& place) {
  return DataError(fmt::format(
      "{} is not UTF-8 throughout: the byte at {} (0x{:02X}, in \"{}\") starts no UTF-8 sequence amid UTF-8 text, "
      "and the BPE tokenizer would read it as U+FFFD. Drop such bytes, e.g. `{}`, {}",
      path.string(), place, static_cast<unsigned char>(text[at]), context_of(text, at),
      conversion_command(path, "-f UTF-8 -t UTF-8 -c"), kByteTokenizer));
}

}  // namespace

void refuse_bytes_that_are_not_utf8(const fs::path& path, std::string_view start, bool more_follow) {
  const Utf8Scan scan = scan_utf8(start, more_follow);
  if (!scan.first_invalid) return;
  const std::size_t at = *scan.first_invalid;
  if (scan.multibyte) throw stray_byte(path, start, at, fmt::format("offset {}", at));
  throw DataError(fmt::format(
      "{} is not UTF-8: the byte at offset {} (0x{:02X}, in \"{}\") starts no UTF-8 sequence, and no letter beyond "
      "ASCII in its first {} bytes is UTF-8. It looks like text in an 8-bit encoding such as Windows-1252 or Latin-1 "
      "(what Excel and older tools save), whose letters beyond ASCII the BPE tokenizer would read as U+FFFD. Convert "
      "it, e.g. `{}` (if UTF-8 letters come later in the file, drop the stray bytes instead: `{}`), {}",
      path.string(), at, static_cast<unsigned char>(start[at]), context_of(start, at), start.size(),
      conversion_command(path, "-f WINDOWS-1252 -t UTF-8"), conversion_command(path, "-f UTF-8 -t UTF-8 -c"),
      kByteTokenizer));
}

void refuse_stray_bytes(const fs::path& path, std::string_view text,
                        const std::function<std::string(std::size_t)>& place) {
  const Utf8Scan scan = scan_utf8(text, /*more_follow=*/false);
  if (scan.first_invalid) throw stray_byte(path, text, *scan.first_invalid, place(*scan.first_invalid));
}

void refuse_what_is_not_utf8_text(const std::filesystem::path& path, std::string_view start) {
  const auto begins = [&](std::string_view mark) { return start.substr(0, mark.size()) == mark; };
  const char* encoding = begins(std::string_view("\xFF\xFE\0\0", 4)) || begins(std::string_view("\0\0\xFE\xFF", 4))
                             ? "UTF-32"
                         : begins("\xFF\xFE") || begins("\xFE\xFF") ? "UTF-16"
                                                                    : nullptr;
  if (encoding != nullptr) {
    throw DataError(fmt::format(
        "{} is {} text (it begins with a byte-order mark), but loco reads UTF-8: convert it, e.g. `{}`, and give "
        "that instead",
        path.string(), encoding, conversion_command(path, fmt::format("-f {} -t UTF-8", encoding))));
  }
  const std::size_t nul = start.substr(0, kBinaryTestBytes).find('\0');
  if (nul != std::string_view::npos) {
    // Named only in a file with a NUL byte (each of these formats has some early on), so that text that
    // happens to hold a format's mark ("gustar" where a tar file has "ustar") is never refused for it.
    if (const CompressionFormat* inner = compression_marked(start)) {
      const CompressionFormat* outer = compression_format(compression_of(path));
      if (outer == nullptr && is_compressed_tar_name(path)) {
        throw DataError(
            fmt::format("{} is {}-compressed data named as a tar archive, which loco does not read as text: unpack it "
                        "(tar xf {}) and give its files or directory",
                        path.string(), inner->name, shell_word(path)));
      }
      if (outer == nullptr) {
        throw DataError(fmt::format("{} is {}-compressed data, which loco does not read as text: name it with {} at "
                                    "the end, and loco decompresses it",
                                    path.string(), inner->name, inner->extension));
      }
      const fs::path plain = without_compression_extension(path);  // a.txt.gz -> a.once.txt.gz
      const fs::path once =
          fs::path(plain).replace_extension(".once" + plain.extension().string()).string() + inner->extension;
      throw DataError(fmt::format(
          "{} is compressed twice: decompressed as {}, it is {}-compressed data again, which loco does not read as "
          "text. Decompress it once (`{} {} > {}`) and give the result",
          path.string(), outer->extension, inner->name, outer->decompressor, shell_word(path), shell_word(once)));
    }
    for (const KnownBinaryFormat& format : kKnownBinaryFormats) {
      if (start.size() >= format.offset && start.substr(format.offset, format.magic.size()) == format.magic) {
        throw DataError(fmt::format("{} is {}, which loco does not read as text: {}", path.string(), format.what,
                                    format.fix));
      }
    }
    throw DataError(
        fmt::format("{} holds a NUL byte at offset {}: it is not UTF-8 text but binary (an image, a PDF, "
                    "an archive loco does not decode: it reads .gz, .zst, .xz and .bz2) or text in UTF-16 or "
                    "UTF-32. Leave it out of --input, or convert it to UTF-8 text",
                    path.string(), nul));
  }
}

}  // namespace loco::data
