#include "loco/util/fs.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>

#include "loco/util/error.h"

namespace loco {

namespace {

std::string errno_text() { return std::strerror(errno); }

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct OpenFile {
  int fd;
  std::uint64_t size;
};

// What to do about a failed open: out of file descriptors (errno EMFILE, ENFILE) the path is not to blame
// (dist.replicas = 10000, or a low ulimit -n, ran out of them), else `otherwise`.
std::string fix_for_failed_open(int error, std::string_view otherwise) {
  if (error != EMFILE && error != ENFILE) return std::string(otherwise);
  return "The process or the system has no file descriptors left (ulimit -n): raise the limit, or run fewer "
         "replicas or threads in one process";
}

}  // namespace

fs::path without_trailing_separator(const fs::path& dir) {
  const fs::path normal = dir.lexically_normal();
  return normal.has_filename() || normal == normal.root_path() ? normal : normal.parent_path();
}

std::string fix_for_failed_write(int error) {
  switch (error) {
    case ENOSPC:
      return "The disk is full: free space on it (or write elsewhere)";
    case EDQUOT:
      return "The disk quota is used up: free space within it (or write elsewhere)";
    case EFBIG:
      return "The file would be larger than this process may write (ulimit -f) or the file system holds: raise "
             "the limit (or write elsewhere)";
    default:
      return "Check free disk space and permissions";
  }
}

namespace {

// A descriptor of `path` opened for reading, which is a regular file (after symbolic links), and its size.
// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer before the check could refuse it.
OpenFile open_regular_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw IoError(fmt::format("cannot read {}: {}. {}", path.string(), errno_text(),
                              fix_for_failed_open(error, "Check the path.")));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw IoError(fmt::format("cannot read {}: {}. Check the path.", path.string(), why));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(fmt::format("cannot read {}: it is {}, and loco reads only regular files. Check the path.",
                              path.string(), file_kind(st.st_mode)));
  }
  // Reads of a regular file never block; the flag only mattered for the open.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return {fd, static_cast<std::uint64_t>(st.st_size)};
}

void write_all(int fd, std::string_view bytes, const fs::path& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      throw IoError(fmt::format("cannot write {}: {}. {}.", path.string(), errno_text(), fix_for_failed_write(error)));
    }
    done += static_cast<std::size_t>(n);
  }
}

// zlib's CRC-32 of `crc` followed by `bytes` (zlib takes uInt lengths: large buffers go in pieces).
uLong crc32_update(uLong crc, std::string_view bytes) {
  const std::size_t chunk = 1u << 30;
  for (std::size_t off = 0; off < bytes.size(); off += chunk) {
    const std::size_t n = std::min(chunk, bytes.size() - off);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + off), static_cast<uInt>(n));
  }
  return crc;
}

}  // namespace

void fsync_path(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw IoError(fmt::format("cannot open {} to sync it: {}", path.string(), errno_text()));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  if (rc != 0) {
    errno = saved;
    throw IoError(fmt::format("cannot sync {} to disk: {}", path.string(), errno_text()));
  }
}

void require_regular_or_absent(const fs::path& path) {
  struct stat st {};
  // Absent (or a dangling link): written. stat follows links, as the rename's target would be the link itself.
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  throw IoError(fmt::format("cannot write {}: it is {}, and loco writes only regular files (it would replace it). "
                            "Give the path of a file",
                            path.string(), file_kind(st.st_mode)));
}

WrittenFile write_file_atomic(const fs::path& path, std::string_view bytes) {
  AtomicFileWriter file(path);
  file.write(bytes);
  return file.commit();
}

int create_new_file(const fs::path& dir, const std::string& stem, fs::path& created) {
  std::string name = fmt::format("{}{}", stem, ::getpid());
  // Seeded without a file descriptor (std::random_device may open /dev/urandom: an error under EMFILE of its own).
  std::mt19937_64 digits(static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                         static_cast<std::uint64_t>(::getpid()));
  for (int attempt = 0;; ++attempt) {
    created = dir / name;
    const int fd = ::open(created.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST || attempt == 16) return fd;
    // Taken: by a file another process of this pid left, or planted. Digits after the pid, which readers of
    // these names (prepare's list of its own files) take as part of it.
    name = fmt::format("{}{}{:09}", stem, ::getpid(), digits() % 1000000000U);
  }
}

AtomicFileWriter::AtomicFileWriter(fs::path path) : path_(std::move(path)), crc_(::crc32(0L, Z_NULL, 0)) {
  require_regular_or_absent(path_);
  const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
  fd_ = create_new_file(dir, fmt::format(".{}.tmp-", path_.filename().string()), tmp_);
  if (fd_ < 0) {
    const int error = errno;
    throw IoError(fmt::format("cannot create {}: {}. {}", tmp_.string(), errno_text(),
                              fix_for_failed_open(error, "Check that the directory exists and is writable.")));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;  // committed
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(std::string_view bytes) {
  LOCO_CHECK(fd_ >= 0, "AtomicFileWriter::write after commit");
  write_all(fd_, bytes, tmp_);
  bytes_ += bytes.size();
  crc_ = crc32_update(crc_, bytes);
}

WrittenFile AtomicFileWriter::commit() {
  LOCO_CHECK(fd_ >= 0, "AtomicFileWriter::commit twice");
  if (::fsync(fd_) != 0) {
    // Space is allocated as late as the sync on some file systems (XFS, NFS): a full disk shows here.
    const int error = errno;
    throw IoError(fmt::format("cannot sync {}: {}. {}.", tmp_.string(), errno_text(), fix_for_failed_write(error)));
  }
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp_.c_str());
    throw IoError(fmt::format("cannot rename {} to {}: {}", tmp_.string(), path_.string(), why));
  }
  fsync_path(path_.has_parent_path() ? path_.parent_path() : fs::path("."));
  return {bytes_, fmt::format("{:08x}", static_cast<std::uint32_t>(crc_))};
}

bool rename_no_replace(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) return false;
    throw IoError(fmt::format("cannot rename {} to {}: {}", from.string(), to.string(), errno_text()));
  }
  fsync_path(to.has_parent_path() ? to.parent_path() : fs::path("."));
  return true;
}

bool remove_tree(const fs::path& path, std::error_code& error) {
  error.clear();
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return true;
    error.assign(errno, std::generic_category());
    return false;
  }
  // Depth first (FTW_DEPTH), without following symbolic links (FTW_PHYS); the first failure stops it.
  auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return ::remove(entry) == 0 ? 0 : errno;
  };
  const int failed = ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
  if (failed != 0) error.assign(failed > 0 ? failed : errno, std::generic_category());
  return failed == 0;
}

void make_fresh_directory(const fs::path& dir) {
  std::error_code ec;
  remove_tree(dir, ec);
  if (!ec) fs::create_directory(dir, ec);
  if (ec) {
    throw IoError(fmt::format("cannot create directory {}: {}. Check free disk space and permissions.", dir.string(),
                              ec.message()));
  }
}

fs::path partial_path(const fs::path& dir, const std::string& name) {
  return dir / ("." + name + ".partial-" + std::to_string(::getpid()));
}

std::vector<std::string> remove_interrupted_writes(const fs::path& dir,
                                                   const std::function<bool(const std::string& name)>& belongs,
                                                   bool others_may_write) {
  std::vector<std::string> removed;
  std::error_code unreadable;
  if (!fs::is_directory(dir, unreadable)) return removed;
  for (const auto& entry : fs::directory_iterator(dir, unreadable)) {
    const std::string file = entry.path().filename().string();
    const auto marker = file.rfind(".partial-");
    if (file.size() < 2 || file[0] != '.' || marker == std::string::npos || marker < 2) continue;
    if (!belongs(file.substr(1, marker - 1))) continue;
    // A writer still at work (two exports to one parent at once): its entry is its own, not a stopped write's.
    const std::string pid_text = file.substr(marker + std::string_view(".partial-").size());
    pid_t pid = 0;
    const auto [end, error] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    const bool parsed = error == std::errc() && end == pid_text.data() + pid_text.size() && pid > 0;
    if (others_may_write && parsed && pid != ::getpid() && (::kill(pid, 0) == 0 || errno == EPERM)) continue;
    std::error_code ignored;
    if (remove_tree(entry.path(), ignored)) removed.push_back(file);
  }
  return removed;
}

std::string read_file(const fs::path& path, std::uint64_t max_bytes) {
  const auto [fd, size] = open_regular_file(path);
  if (size > max_bytes) {
    ::close(fd);
    throw IoError(fmt::format("{} is {} bytes, more than the {} loco reads from such a file; it is not the file "
                              "loco wrote there. Check the path.",
                              path.string(), size, max_bytes));
  }
  std::string bytes(size, '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {  // a file that grows meanwhile is read up to the size it had
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? errno_text() : "it became shorter while it was read";
      ::close(fd);
      throw IoError(fmt::format("cannot read {}: {}. Check the path.", path.string(), why));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return bytes;
}

void ensure_writable_directory(const fs::path& dir, std::string_view what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw IoError(
        fmt::format("cannot create {} '{}': {}. Choose a directory you can write to (for example under your "
                    "home directory) or fix its permissions.",
                    what, dir.string(), ec ? ec.message() : "a file with that name exists"));
  }
  fs::path probe;
  int fd = create_new_file(dir, ".loco-write-test-", probe);
  if (fd < 0) {
    const int error = errno;
    if (error == EMFILE || error == ENFILE) {
      throw IoError(fmt::format("cannot write into {} '{}': {}. {}", what, dir.string(), errno_text(),
                                fix_for_failed_open(error, "")));
    }
    throw IoError(
        fmt::format("{} '{}' is not writable: {}. Choose a directory you can write to or fix its permissions.", what,
                    dir.string(), errno_text()));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  // Written, but not readable (mode 0300 for its owner): every write's sync of the directory failed, the first one
  // after config.toml was written, naming no fix (audit round 14).
  const int listing = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) {
    throw IoError(
        fmt::format("{} '{}' cannot be read ({}): loco reads the directory to sync what it writes and to "
                    "find its files again. Give yourself read permission (chmod u+r {})",
                    what, dir.string(), errno_text(), dir.string()));
  }
  ::close(listing);
}

std::string crc32_hex(std::string_view bytes) {
  return fmt::format("{:08x}", static_cast<std::uint32_t>(crc32_update(::crc32(0L, Z_NULL, 0), bytes)));
}

std::string crc32_hex_of_file(const fs::path& path) {
  MappedFile file(path);
  return crc32_hex(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()));
}

MappedFile::MappedFile(const fs::path& path) : path_(path) {
  const auto [fd, size] = open_regular_file(path);
  size_ = static_cast<std::size_t>(size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw IoError(fmt::format("cannot map {}: {}", path.string(), errno_text()));
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace loco
