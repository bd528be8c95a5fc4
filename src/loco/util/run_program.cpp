#include "loco/util/run_program.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "loco/util/error.h"

extern char** environ;

namespace loco {

namespace {

// The child's side of fork: only async-signal-safe calls until exec (the parent has other threads). An
// errno that stops it is written to `report` (closed on exec, so the parent reads nothing when exec works).
[[noreturn]] void become_program(char* const* argv, const char* stdout_file, const char* stderr_file, int flags,
                                 pid_t parent, int report) {
  // The parent's handlers (a sweep's stop) mean nothing here, nor its blocked signals.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int failure = 0;
  // A process group of its own: a terminal's Ctrl-C reaches only loco, which passes the stop on once (a
  // loco train given SIGINT by the terminal and then SIGTERM by its sweep took the second as "stop at once").
  ::setpgid(0, 0);
  // SIGTERM when the starting thread ends; if it already has, getppid() names another process.
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent) ::_exit(127);
  const int out = ::open(stdout_file, flags, 0644);
  const int err = stderr_file == nullptr ? out : ::open(stderr_file, flags, 0644);
  if (out < 0 || err < 0 || ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) {
    failure = errno;
  } else {
    // The program holds its output at 1 and 2 only (open may also have returned 1 or 2 itself).
    if (out > STDERR_FILENO) ::close(out);
    if (err > STDERR_FILENO && err != out) ::close(err);
    ::execve(argv[0], argv, environ);
    failure = errno;
  }
  [[maybe_unused]] const auto written = ::write(report, &failure, sizeof failure);
  ::_exit(127);
}

// Starts the program; throws Error naming it when it cannot be.
pid_t start_program(const std::vector<std::string>& argv, const ProgramOutput& output) {
  std::vector<std::string> args = argv;
  std::vector<char*> pointers;
  for (std::string& a : args) pointers.push_back(a.data());
  pointers.push_back(nullptr);
  const int flags = O_WRONLY | O_CREAT | (output.append ? O_APPEND : O_TRUNC);
  const std::string stdout_file = output.stdout_file.string(), stderr_file = output.stderr_file.string();
  const bool one_file = output.stderr_file == output.stdout_file;
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    throw Error(fmt::format("cannot start {}: {}.", argv[0], std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    become_program(pointers.data(), stdout_file.c_str(), one_file ? nullptr : stderr_file.c_str(), flags, parent,
                   report[1]);
  }
  const int fork_error = errno;
  ::close(report[1]);
  int failure = 0;
  ssize_t got = 0;
  if (pid > 0) {
    while ((got = ::read(report[0], &failure, sizeof failure)) < 0 && errno == EINTR) {
    }
  }
  ::close(report[0]);
  if (pid < 0) throw Error(fmt::format("cannot start {}: {}.", argv[0], std::strerror(fork_error)));
  if (got == sizeof failure) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw Error(fmt::format("cannot start {}: {}.", argv[0], std::strerror(failure)));
  }
  return pid;
}

}  // namespace

void StoppablePrograms::stop(int signal) {
  std::lock_guard lock(mutex_);
  if (signal_ == 0) signal_ = signal;
  for (const pid_t pid : running_) ::kill(pid, signal_);
}

int StoppablePrograms::stopped() const {
  std::lock_guard lock(mutex_);
  return signal_;
}

int run_program(const std::vector<std::string>& argv, const ProgramOutput& output, StoppablePrograms* programs) {
  if (argv.empty()) throw InternalError("run_program: no program given");
  pid_t pid = 0;
  if (programs == nullptr) {
    pid = start_program(argv, output);
  } else {
    // Started under the lock: a stop either finds it running or comes before it would start.
    std::lock_guard lock(programs->mutex_);
    if (programs->signal_ != 0) return 128 + programs->signal_;
    pid = start_program(argv, output);
    programs->running_.insert(pid);
  }
  int status = 0;
  int waited = 0;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  const int wait_error = errno;
  if (programs != nullptr) {
    std::lock_guard lock(programs->mutex_);
    programs->running_.erase(pid);
  }
  if (waited < 0) throw Error(fmt::format("waiting for {} failed: {}.", argv[0], std::strerror(wait_error)));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace loco
