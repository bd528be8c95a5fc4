// Helpers shared by the test binaries: scratch directories and running the loco binary.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loco::test {

// A fresh directory under the system temp dir, removed when the object dies.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A TCP socket listening on a free loopback port; closed when the object dies.
class ListeningSocket {
 public:
  ListeningSocket();
  ~ListeningSocket();
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_;
  int port_ = 0;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs the loco binary with `args` (shell-quoted here), capturing its output.
CommandResult run_loco(const std::vector<std::string>& args);

// run_loco, stopped after `seconds` by timeout(1) (exit code 124 then): for inputs that could make loco
// hang, so that a regression fails the test instead of stalling the suite.
CommandResult run_loco_within(int seconds, const std::vector<std::string>& args);

// run_loco_within, with the process's address space limited to `kib` KiB (ulimit -v): an allocation beyond it
// fails as it would on a machine without the memory, without the test using it.
CommandResult run_loco_in_memory(int seconds, std::uint64_t kib, const std::vector<std::string>& args);

// run_loco_within, with the files the process writes limited to `bytes` each (prlimit --fsize, ulimit -f): a
// write past it fails as one onto a full disk does, without filling one.
CommandResult run_loco_with_file_size_limit(int seconds, std::uint64_t bytes, const std::vector<std::string>& args);

// run_loco_within, started through `prefix` (a command that execs the rest: "/usr/bin/prlimit --stack=131072",
// "setpriv --reuid 54321 …"): limits and users as a shell or a container sets them.
CommandResult run_loco_under(int seconds, const std::string& prefix, const std::vector<std::string>& args);

// The loco binary started in the background with `args`, stdout and stderr to the files `out` and `err`; its pid.
pid_t start_loco(const std::vector<std::string>& args, const std::filesystem::path& out,
                 const std::filesystem::path& err);
// Waits for the process `pid` started by start_loco: its exit status, or 128 + the signal that ended it. With a
// `limit`, a process still running then is killed (SIGKILL) and -1 returned, so that a hang fails the test.
int wait_exit(pid_t pid, std::chrono::seconds limit = std::chrono::hours(24));
// Polls `condition` every 20 ms until it holds (true) or `timeout` passes (false).
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// The lines of RUN_DIR/metrics.jsonl, parsed; a last line still being written is left out.
std::vector<nlohmann::json> read_metrics(const std::filesystem::path& run_dir);

// What `run` threw as a loco::Error (its message), or "" when it threw nothing.
std::string error_message(const std::function<void()>& run);

// Writes `text` to `path`, creating parent directories.
void write_text(const std::filesystem::path& path, const std::string& text);
// The bytes of the file at `path` ("" when it cannot be read).
std::string read_text(const std::filesystem::path& path);

// Sets LOCO_RUN_SECRET in this process's environment (and clears LOCO_RUN_SECRET_FILE), so that the
// coordinators and members a test starts share a run secret (docs/security.md); returns it.
std::string use_test_run_secret();

// A small byte-level corpus prepared by `loco prepare` into DIR/data (text in DIR/text), for
// command-line tests that train.
void prepare_tiny_byte_data(const std::filesystem::path& dir);

// The [model] and [data] sections of a run config of the tests' tiny model (hidden size 32, two layers, four
// heads) on the data in `data_dir`, 16 tokens a window; a test adds the other sections.
std::string tiny_model_toml(const std::string& data_dir);

}  // namespace loco::test
