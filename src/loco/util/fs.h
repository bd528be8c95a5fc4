// File-system helpers that never leave a half-written file that looks whole: everything is written
// to a temporary name in the same directory, fsynced, then renamed over the final name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace loco {

namespace fs = std::filesystem;

// What a file was written with: its size and CRC-32 (crc32_hex below), as checkpoints record them.
struct WrittenFile {
  std::uint64_t bytes = 0;
  std::string crc32;
};

// What to do about a write that failed with `error` (errno): free space on a full disk, the quota or the file size
// limit (ulimit -f) reached, or else check space and permissions. A sentence without its final period.
std::string fix_for_failed_write(int error);

// `dir` normalised, without a trailing separator ("corpus/" as "corpus"): what its parent_path() and filename()
// mean (the parent of "data/" as given is "data" itself).
fs::path without_trailing_separator(const fs::path& dir);

// Throws IoError when something other than a regular file (or a link to one) is at `path`: a directory, a
// device such as /dev/null, a FIFO, a socket. loco replaces only files it could have written; a rename over
// /dev/null replaced the machine's device with a file (`loco fit --chart /dev/null`, audit round 3).
void require_regular_or_absent(const fs::path& path);

// Creates a new file `dir`/`stem`PID for writing (a number after it where that name is taken), never through
// a file or a link already there (O_EXCL | O_NOFOLLOW): in a directory others can write to (a /tmp-style run
// directory, one another user owns), a link planted at the predictable name made a root run truncate or
// overwrite the file it points to (audit round 14). The file descriptor (close-on-exec), -1 with errno set
// otherwise; `created` is its path.
int create_new_file(const fs::path& dir, const std::string& stem, fs::path& created);

// Writes `bytes` to `path` atomically (temporary file + fsync + rename + fsync of the directory); `path` must
// be a regular file or absent (require_regular_or_absent).
WrittenFile write_file_atomic(const fs::path& path, std::string_view bytes);

// The same for a file written in pieces, so that no copy of the whole file is held in memory (a
// checkpoint's tensors): the pieces go to a temporary file, counted and CRC-32'd on the way; commit()
// fsyncs it, renames it to `path` and says what was written. Destroyed uncommitted (an error on the way),
// it removes the temporary file: `path` appears whole or not at all.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(fs::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view bytes);
  WrittenFile commit();

 private:
  fs::path path_, tmp_;
  int fd_ = -1;
  std::uint64_t bytes_ = 0;
  unsigned long crc_ = 0;
};

// Reads a whole regular file of at most `max_bytes`; throws IoError naming the path when it cannot, when
// it is larger, or when it is not a regular file (a FIFO, a device, a directory): that is refused before
// a byte is read, so a FIFO cannot block the reader and /dev/zero cannot feed it without end.
inline constexpr std::uint64_t kAnySize = ~std::uint64_t{0};
std::string read_file(const fs::path& path, std::uint64_t max_bytes = kAnySize);

// Creates `dir` (and parents) and checks that a file can be created in it; throws IoError with the
// fix when not. `what` names the directory's role in the message ("train.out_dir").
void ensure_writable_directory(const fs::path& dir, std::string_view what);

// Renames `from` to `to` only if `to` does not exist (renameat2 RENAME_NOREPLACE, atomically), then
// syncs the parent directory. Returns false when `to` exists; throws IoError on other failures.
bool rename_no_replace(const fs::path& from, const fs::path& to);

// Removes `path` and everything under it, like std::filesystem::remove_all but through POSIX nftw
// (note "no-fs-remove-all"): a PyTorch wheel's libtorch exports its own copy of libstdc++'s
// std::filesystem functions, and its remove_all crashed when called from loco built by another g++
// (seen with 2.11.0+cu130 on the lent H100). Returns false and sets `error` on failure; a missing
// path is not an error.
bool remove_tree(const fs::path& path, std::error_code& error);

// Creates a fresh empty directory `dir` (removing a leftover one of that name); IoError on failure.
void make_fresh_directory(const fs::path& dir);

// The temporary name ".NAME.partial-PID" under which `name` is written in `dir` before it is renamed into
// place (a checkpoint, an export).
fs::path partial_path(const fs::path& dir, const std::string& name);
// Removes what writers of `dir` that were stopped before their rename left: the ".NAME.partial-PID" entries
// whose NAME `belongs` (a killed run's checkpoint can be a gigabyte, and every preemption leaves one). Where
// several processes may write `dir` at once (exports to one parent directory), `others_may_write` keeps the
// entries of live processes of this host other than this one: theirs, still at work. (A process id is reused in
// time; a directory one process writes at a time, under its lock, needs no such guess.) Returns their names.
std::vector<std::string> remove_interrupted_writes(const fs::path& dir,
                                                   const std::function<bool(const std::string& name)>& belongs,
                                                   bool others_may_write = false);

// fsync on a file or directory path; throws IoError on failure.
void fsync_path(const fs::path& path);

// CRC-32 (zlib) of a byte range, as 8 lowercase hex digits: detects truncation and bit rot.
std::string crc32_hex(std::string_view bytes);
std::string crc32_hex_of_file(const fs::path& path);

// A read-only memory mapping of a whole regular file (others are refused as read_file refuses them),
// unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const fs::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace loco
