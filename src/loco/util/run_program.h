// Runs another program to completion with its output in files (gnuplot for charts, loco itself for the
// runs of a sweep).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace loco {

struct ProgramOutput {
  std::filesystem::path stdout_file;
  std::filesystem::path stderr_file;  // the same path as stdout_file: both into one file
  bool append = false;                // false: the files are truncated first
};

// The programs several threads run with run_program, stopped together (a sweep stopped by SIGTERM): stop()
// passes its signal to every one running, and no other starts after it. Without it, a sweep's runs went on
// training after the sweep was stopped, and raced the sweep started again.
class StoppablePrograms {
 public:
  // Sends `signal` to the programs running now; later run_program calls start nothing. Callable from any
  // thread (StopOnSignal's, say); the first call's signal is kept.
  void stop(int signal);
  // The signal stop() was given; 0 before.
  int stopped() const;

 private:
  friend int run_program(const std::vector<std::string>& argv, const ProgramOutput& output,
                         StoppablePrograms* programs);
  mutable std::mutex mutex_;
  std::set<pid_t> running_;
  int signal_ = 0;
};

// Runs `argv` (argv[0]: the program's path; PATH is not searched) in this process's environment and waits
// for it. Returns its exit status, or 128 + the signal that ended it. Error naming the program when it
// cannot be started. The program runs in a process group of its own (a terminal's signals reach only this
// process, which decides what to pass on) and gets SIGTERM when the thread that started it ends
// (PR_SET_PDEATHSIG): a loco killed outright leaves no program running (loco train stops at its next step on
// SIGTERM).
// With `programs`, the program is one of them; once they are stopped, nothing is started and 128 + the
// stopping signal is returned.
int run_program(const std::vector<std::string>& argv, const ProgramOutput& output,
                StoppablePrograms* programs = nullptr);

}  // namespace loco
