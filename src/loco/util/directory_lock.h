// An exclusive claim on a directory that loco writes (a prepared data directory, a run's directory), held
// while the object lives. Two loco processes writing one directory would interleave their files, and each
// would take the other's half-written files for what an interrupted run left, and remove them. The claim is
// a flock(2) on the directory itself: the kernel lets go when the process ends, however it ends, so a killed
// run leaves nothing behind to clear.
#pragma once

#include <filesystem>
#include <string_view>

namespace loco {

class DirectoryLock {
 public:
  // Claims `dir` (an existing directory). ConfigError naming `what` (e.g. "--out directory") when another
  // process, or another claim in this one, holds it. Where the file system has no such locks (some network
  // file systems), no claim is made and nothing is said: the directory is written as before.
  DirectoryLock(const std::filesystem::path& dir, std::string_view what);
  ~DirectoryLock();
  DirectoryLock(DirectoryLock&& other) noexcept;
  DirectoryLock& operator=(DirectoryLock&& other) noexcept;
  DirectoryLock(const DirectoryLock&) = delete;
  // Whether another process (or claim) holds `dir` now: a run being written, data being prepared. False where it
  // cannot be told (no such directory, no locks on its file system).
  static bool held(const std::filesystem::path& dir);
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace loco
