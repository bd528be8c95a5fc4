#include "support/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "loco/util/error.h"
#include "loco/util/fs.h"

extern char** environ;

namespace loco::test {

namespace fs = std::filesystem;

ScratchDir::ScratchDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() /
          ("loco-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
  remove_tree(path_, ec);
}

ListeningSocket::ListeningSocket() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || ::listen(fd_, 1) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot listen on a loopback port");
  }
  port_ = ntohs(address.sin_port);
}

ListeningSocket::~ListeningSocket() { ::close(fd_); }

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace

namespace {

CommandResult run_command(std::string cmd, const std::vector<std::string>& args) {
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed for " + cmd);
  CommandResult result;
  std::array<char, 4096> buffer{};
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace

CommandResult run_loco(const std::vector<std::string>& args) { return run_command(shell_quote(LOCO_BINARY), args); }

CommandResult run_loco_within(int seconds, const std::vector<std::string>& args) {
  return run_command(fmt::format("timeout -k 5 {} {}", seconds, shell_quote(LOCO_BINARY)), args);
}

CommandResult run_loco_in_memory(int seconds, std::uint64_t kib, const std::vector<std::string>& args) {
  return run_command(fmt::format("ulimit -v {} && exec timeout -k 5 {} {}", kib, seconds, shell_quote(LOCO_BINARY)),
                     args);
}

CommandResult run_loco_with_file_size_limit(int seconds, std::uint64_t bytes, const std::vector<std::string>& args) {
  return run_loco_under(seconds, fmt::format("/usr/bin/prlimit --fsize={}", bytes), args);
}

CommandResult run_loco_under(int seconds, const std::string& prefix, const std::vector<std::string>& args) {
  return run_command(fmt::format("exec {} timeout -k 5 {} {}", prefix, seconds, shell_quote(LOCO_BINARY)), args);
}

pid_t start_loco(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  std::vector<std::string> words{LOCO_BINARY};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // SIGINT and SIGTERM as a program started from a terminal has them, whatever this test inherited (a test
  // run in the background with `&` ignores SIGINT).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, LOCO_BINARY, &actions, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn failed for " + std::string(LOCO_BINARY));
  return pid;
}

int wait_exit(pid_t pid, std::chrono::seconds limit) {
  int status = 0;
  const bool ended = eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, limit);
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<nlohmann::json> read_metrics(const fs::path& run_dir) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line) && !in.eof();) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string error_message(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

std::string use_test_run_secret() {
  static const std::string secret = "loco-tests-run-secret";
  ::setenv("LOCO_RUN_SECRET", secret.c_str(), 1);
  ::unsetenv("LOCO_RUN_SECRET_FILE");
  return secret;
}

void prepare_tiny_byte_data(const std::filesystem::path& dir) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += fmt::format("the jury said {} laws are old and the city is {}. ", i % 7, i % 5);
  for (int d = 0; d < 6; ++d) write_text(dir / fmt::format("text/doc{}.txt", d), text);
  const auto r = run_loco({"prepare", "--input", (dir / "text").string(), "--out", (dir / "data").string(),
                           "--tokenizer", "byte", "--val-fraction", "0.2"});
  if (r.exit_code != 0) throw std::runtime_error("loco prepare failed:\n" + r.output);
}

std::string tiny_model_toml(const std::string& data_dir) {
  return fmt::format(
      "[model]\nhidden_size = 32\nnum_hidden_layers = 2\nnum_attention_heads = 4\n[data]\ndir = \"{}\"\n"
      "seq_len = 16\n",
      data_dir);
}

}  // namespace loco::test
