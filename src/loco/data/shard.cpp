#include "loco/data/shard.h"

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "loco/util/error.h"
#include "loco/util/fs.h"

// Tokens and header fields are copied with memcpy, which is little-endian only on such hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shard I/O assumes a little-endian host");

namespace loco::data {

namespace {

constexpr char kMagic[8] = {'L', 'O', 'C', 'O', 'T', 'O', 'K', '1'};
constexpr const char* kRegenerate =
    "Run `loco prepare` again (into a new --out directory, or after deleting this one).";

template <typename T>
T load(const std::uint8_t* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

template <typename T>
void store(unsigned char* bytes, T value) {
  std::memcpy(bytes, &value, sizeof(T));
}

std::array<unsigned char, kShardHeaderBytes> encode_header(std::uint32_t bytes_per_token, std::uint64_t count) {
  std::array<unsigned char, kShardHeaderBytes> header{};
  std::memcpy(header.data(), kMagic, sizeof(kMagic));
  store<std::uint32_t>(header.data() + 8, kShardVersion);
  store<std::uint32_t>(header.data() + 12, bytes_per_token);
  store<std::uint64_t>(header.data() + 16, count);
  return header;  // bytes 24..31 (reserved) stay zero
}

}  // namespace

std::uint32_t bytes_per_token_for(std::uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

std::string shard_file_name(const std::string& split, std::size_t index) {
  return fmt::format("{}_{:03d}.bin", split, index);
}

ShardWriter::ShardWriter(fs::path path, std::uint32_t bytes_per_token)
    : path_(std::move(path)), bytes_per_token_(bytes_per_token), tokens_crc_(::crc32(0L, Z_NULL, 0)) {
  LOCO_CHECK(bytes_per_token == 2 || bytes_per_token == 4, "bytes_per_token {}", bytes_per_token);
  const int fd = create_new_file(path_.parent_path(), fmt::format(".{}.tmp-", path_.filename().string()), temporary_);
  file_ = fd < 0 ? nullptr : ::fdopen(fd, "wb");
  if (fd >= 0 && file_ == nullptr) ::close(fd);
  if (file_ == nullptr) {
    throw IoError(fmt::format("cannot create {}: {}. Check that the directory is writable.", temporary_.string(),
                              std::strerror(errno)));
  }
  auto header = encode_header(bytes_per_token_, 0);  // rewritten with the count by finish()
  write(header.data(), header.size());
}

ShardWriter::~ShardWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::error_code ignored;
    fs::remove(temporary_, ignored);
  }
}

void ShardWriter::write(const void* bytes, std::size_t size) {
  if (std::fwrite(bytes, 1, size, file_) != size) {
    const int error = errno;
    throw IoError(fmt::format("cannot write {}: {}. {}.", temporary_.string(), std::strerror(error),
                              fix_for_failed_write(error)));
  }
}

void ShardWriter::append(const std::uint32_t* tokens, std::size_t count) {
  buffer_.resize(count * bytes_per_token_);
  for (std::size_t i = 0; i < count; ++i) {
    if (bytes_per_token_ == 2) {
      LOCO_CHECK(tokens[i] <= 0xFFFF, "token {} does not fit a uint16 shard", tokens[i]);
      store<std::uint16_t>(buffer_.data() + 2 * i, static_cast<std::uint16_t>(tokens[i]));
    } else {
      store<std::uint32_t>(buffer_.data() + 4 * i, tokens[i]);
    }
  }
  write(buffer_.data(), buffer_.size());
  // At most tokens_per_shard tokens per call (SplitWriter), well below zlib's 4 GiB uInt.
  tokens_crc_ = ::crc32(tokens_crc_, buffer_.data(), static_cast<uInt>(buffer_.size()));
  count_ += count;
}

void ShardWriter::finish() {
  auto header = encode_header(bytes_per_token_, count_);
  // The file is the header then the tokens: CRC(file) = combine(CRC(header), CRC(tokens), their length).
  const uLong header_crc = ::crc32(0L, header.data(), static_cast<uInt>(header.size()));
  const auto tokens_bytes = static_cast<z_off_t>(count_ * bytes_per_token_);
  checksum_ = fmt::format("{:08x}", static_cast<std::uint32_t>(::crc32_combine(header_crc, tokens_crc_, tokens_bytes)));
  bool ok = std::fflush(file_) == 0 && std::fseek(file_, 0, SEEK_SET) == 0;
  if (ok) write(header.data(), header.size());
  ok = ok && std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  int closed = std::fclose(file_);
  file_ = nullptr;
  if (!ok || closed != 0 || std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    std::error_code ignored;
    fs::remove(temporary_, ignored);
    throw IoError(
        fmt::format("cannot finish {}: {}. {}.", path_.string(), std::strerror(error), fix_for_failed_write(error)));
  }
  fsync_path(path_.parent_path());
}

ShardReader::ShardReader(const fs::path& path) : file_(path) {
  const std::uint8_t* bytes = file_.data();
  const std::uint64_t size = file_.size();
  auto corrupt = [&](const std::string& problem) {
    return DataError(fmt::format("token shard {} {}. {}", path.string(), problem, kRegenerate));
  };
  if (size < kShardHeaderBytes) {
    throw corrupt(fmt::format("is truncated: {} bytes, less than the {}-byte header", size, kShardHeaderBytes));
  }
  if (std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0) {
    throw corrupt("is not a loco token shard (its first bytes are not LOCOTOK1)");
  }
  auto version = load<std::uint32_t>(bytes + 8);
  if (version != kShardVersion) {
    throw corrupt(fmt::format("has format version {}; this loco reads version {}", version, kShardVersion));
  }
  bytes_per_token_ = load<std::uint32_t>(bytes + 12);
  if (bytes_per_token_ != 2 && bytes_per_token_ != 4) {
    throw corrupt(fmt::format("has {} bytes per token; only 2 and 4 exist", bytes_per_token_));
  }
  count_ = load<std::uint64_t>(bytes + 16);
  // Dividing, not multiplying, so that a corrupted huge count cannot overflow into a match.
  if ((size - kShardHeaderBytes) % bytes_per_token_ != 0 || (size - kShardHeaderBytes) / bytes_per_token_ != count_) {
    throw corrupt(
        fmt::format("is truncated or corrupted: its header announces {} tokens of {} bytes "
                    "but the file has {} bytes",
                    count_, bytes_per_token_, size));
  }
}

void ShardReader::copy(std::uint64_t begin, std::uint64_t count, std::int64_t* out) const {
  LOCO_CHECK(begin <= count_ && count <= count_ - begin, "tokens [{}, {}) outside shard {} of {}", begin, begin + count,
             path().string(), count_);
  const std::uint8_t* tokens = file_.data() + kShardHeaderBytes + begin * bytes_per_token_;
  for (std::uint64_t i = 0; i < count; ++i) {
    out[i] = bytes_per_token_ == 2 ? load<std::uint16_t>(tokens + 2 * i) : load<std::uint32_t>(tokens + 4 * i);
  }
}

SplitWriter::SplitWriter(fs::path dir, std::string split, std::uint32_t bytes_per_token, std::uint64_t tokens_per_shard)
    : dir_(std::move(dir)),
      split_(std::move(split)),
      bytes_per_token_(bytes_per_token),
      tokens_per_shard_(tokens_per_shard) {
  LOCO_CHECK(tokens_per_shard > 0, "tokens_per_shard must be positive");
  start_shard();
}

void SplitWriter::finish_shard() {
  shard_->finish();
  checksums_[names_.back()] = shard_->checksum();
}

void SplitWriter::start_shard() {
  names_.push_back(shard_file_name(split_, names_.size()));
  shard_ = std::make_unique<ShardWriter>(dir_ / names_.back(), bytes_per_token_);
}

void SplitWriter::append(const std::vector<std::uint32_t>& tokens) {
  for (std::size_t done = 0; done < tokens.size();) {
    if (shard_->count() == tokens_per_shard_) {
      finish_shard();
      start_shard();
    }
    std::size_t n = std::min<std::uint64_t>(tokens.size() - done, tokens_per_shard_ - shard_->count());
    shard_->append(tokens.data() + done, n);
    done += n;
  }
}

std::vector<std::string> SplitWriter::finish() {
  finish_shard();
  return names_;
}

}  // namespace loco::data
