// A child process for tests that run loco (or a test worker) next to themselves: its stdout and stderr
// are collected on a thread (so it never blocks on a full pipe), and it is SIGKILLed and reaped when the
// object dies. Tests send signals only to the processes they started, by pid.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace loco::test {

class ChildProcess {
 public:
  // args[0] is the program's path.
  explicit ChildProcess(const std::vector<std::string>& args);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int number);
  // The first match of `pattern` in the output (the whole match, then each group), waiting up to
  // `limit_s` for it.
  std::optional<std::vector<std::string>> wait_for(const std::regex& pattern, double limit_s);
  // The exit status (128 + signal when killed), or -1 when it did not end within `limit_s`.
  int wait(double limit_s);
  std::string output() const;

 private:
  void collect(int fd);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable grew_;
  std::string output_;
  std::thread reader_;
};

}  // namespace loco::test
