#include "loco/data/table_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loco::data {

namespace fs = std::filesystem;

DataError TableFileProblems::unsupported(const std::string& what) const {
  return DataError(
      fmt::format("{}: {}. Write the file again with pyarrow's defaults, convert it to JSON Lines "
                  "(`datasets`' to_json), or leave it out of --input",
                  path.string(), what));
}

DataError TableFileProblems::wrong_column(const std::string& what) const {
  return DataError(fmt::format("{}: column '{}' {}; name the column that holds the text with --text-field",
                               path.string(), column, what));
}

DataError TableFileProblems::missing_column(const std::vector<std::string>& columns) const {
  if (columns.empty()) {
    return DataError(
        fmt::format("{} has no columns, so no column '{}' to read: a {} file of documents needs one "
                    "that holds the text. Fix the file, or leave it out of --input",
                    path.string(), column, format));
  }
  return DataError(
      fmt::format("{} has no column '{}'; its columns are {}. Name the one that holds the text with "
                  "--text-field",
                  path.string(), column, fmt::join(columns, ", ")));
}

DataError TableFileProblems::damaged(const std::string& what) const {
  return DataError(
      fmt::format("{}: {}; the {} file is damaged or was cut short (an interrupted download?). "
                  "Fetch it again, or leave it out of --input",
                  path.string(), what, format));
}

PositionalFile::PositionalFile(const TableFileProblems& problems) : problems_(problems) {
  const fs::path& path = problems.path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw IoError(
        fmt::format("cannot open {}: {}. Check the path and its permissions.", path.string(), std::strerror(errno)));
  }
  std::error_code error;
  size_ = fs::file_size(path, error);
  if (error) {
    ::close(fd_);
    throw IoError(fmt::format("cannot read the size of {}: {}.", path.string(), error.message()));
  }
}

PositionalFile::~PositionalFile() { ::close(fd_); }

std::string PositionalFile::read_at(std::uint64_t offset, std::uint64_t size) const {
  if (offset > size_ || size > size_ - offset) {
    throw problems_.damaged(
        fmt::format("{} bytes at offset {} lie past the file's end ({} bytes)", size, offset, size_));
  }
  std::string read(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < read.size()) {
    const ssize_t got = ::pread(fd_, read.data() + done, read.size() - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw IoError(fmt::format("cannot read {}: {}.", problems_.path.string(), std::strerror(errno)));
    if (got == 0) throw problems_.damaged("the file ended while it was read");
    done += static_cast<std::size_t>(got);
  }
  return read;
}

}  // namespace loco::data
