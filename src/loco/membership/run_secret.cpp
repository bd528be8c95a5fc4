#include "loco/membership/run_secret.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "loco/membership/authentication.h"
#include "loco/util/error.h"

namespace loco::membership {

namespace {

std::string checked(std::string secret, const std::string& what) {
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) secret.pop_back();
  if (secret.size() < kMinimumSecretCharacters) {
    throw ConfigError(fmt::format("{} holds a secret of {} characters; a run's secret needs at least {} (make one "
                                  "with `loco coordinator --secret-file FILE`, which writes a new one to FILE)",
                                  what, secret.size(), kMinimumSecretCharacters));
  }
  return secret;
}

}  // namespace

std::string read_secret_file(const std::filesystem::path& file, const std::string& what) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    throw ConfigError(fmt::format("{} names {}, which cannot be read ({}); give the path of the run's secret file",
                                  what, file.string(), std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    throw ConfigError(fmt::format("{} names {}, which is {}, not a file; give the path of the run's secret file", what,
                                  file.string(), S_ISDIR(info.st_mode) ? "a directory" : "a device, FIFO or socket"));
  }
  // Another user's file (audit round 14): its owner knows the run's secret and may change it.
  if (info.st_uid != ::geteuid()) {
    throw ConfigError(
        fmt::format("{} names {}, which belongs to another user (uid {}), who can read and change "
                    "the run's secret; use a secret file of your own: cp {} my.secret && chmod 600 "
                    "my.secret",
                    what, file.string(), info.st_uid, file.string()));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw ConfigError(fmt::format("{} names {}, which users other than its owner may read or write (mode {:o}); "
                                  "restrict it: chmod 600 {}",
                                  what, file.string(), info.st_mode & 0777, file.string()));
  }
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw ConfigError(fmt::format("{} names {}, which cannot be read", what, file.string()));
  return checked(text.str(), fmt::format("{} ({})", what, file.string()));
}

std::optional<std::string> run_secret_from_environment() {
  const char* file = std::getenv("LOCO_RUN_SECRET_FILE");
  if (file != nullptr && *file != '\0') return read_secret_file(file, "LOCO_RUN_SECRET_FILE");
  const char* secret = std::getenv("LOCO_RUN_SECRET");
  if (secret != nullptr && *secret != '\0') return checked(secret, "LOCO_RUN_SECRET");
  return std::nullopt;
}

std::string new_run_secret() { return random_hex(32); }

void create_secret_file(const std::filesystem::path& file, const std::string& secret) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw IoError(fmt::format("cannot create the secret file {} ({})", file.string(), std::strerror(errno)));
  }
  const std::string line = secret + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    std::filesystem::remove(file);
    throw IoError(fmt::format("cannot write the secret file {}", file.string()));
  }
}

}  // namespace loco::membership
