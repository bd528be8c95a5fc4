#include "loco/util/turn_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace loco {

TurnLock::TurnLock(const std::filesystem::path& dir, std::string_view name) {
  const std::filesystem::path file = dir / ("." + std::string(name) + ".turn");
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) return;
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    ::close(fd_);  // no locks on this file system
    fd_ = -1;
    return;
  }
}

TurnLock::~TurnLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace loco
