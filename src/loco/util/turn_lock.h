// A turn at work that several processes may do on one directory, one after the other: reading what is there and
// writing a summary of it (a sweep's tables, written by the sweep as it ends and by `loco sweep --tables-only`
// meanwhile). Without turns, the one that read first could rename its older tables over the newer ones. The turn
// is a flock(2) on a hidden file in the directory, `.NAME.turn`: waited for, released when the object goes (or the
// process ends, however it ends).
#pragma once

#include <filesystem>
#include <string_view>

namespace loco {

class TurnLock {
 public:
  // Waits for the turn named `name` in `dir` (an existing directory). Where the file cannot be made or the file
  // system has no such locks, no turn is taken: the work goes on as before, and its writes say what is wrong.
  TurnLock(const std::filesystem::path& dir, std::string_view name);
  ~TurnLock();
  TurnLock(const TurnLock&) = delete;
  TurnLock& operator=(const TurnLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace loco
