// Runs another program to completion with its output in files (gnuplot for charts, loco itself for the
// runs of a sweep).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace loco {

struct ProgramOutput {
  std::filesystem::path stdout_file;
  std::filesystem::path stderr_file;  // the same path as stdout_file: both into one file
  bool append = false;                // false: the files are truncated first
};

// Runs `argv` (argv[0]: the program's path; PATH is not searched) in this process's environment and waits
// for it. Returns its exit status, or 128 + the signal that ended it. Error naming the program when it
// cannot be started.
int run_program(const std::vector<std::string>& argv, const ProgramOutput& output);

}  // namespace loco
