// `loco coordinator` as a user runs it: it prints where it listens, answers /status, and stops cleanly
// on SIGTERM; a taken port is a clear error.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "support/test_support.h"

extern char** environ;

namespace loco {
namespace {

// A child process whose stdout (and stderr) we read; killed and reaped when the object dies.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    output_ = fdopen(pipe_fds[0], "r");
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (output_) fclose(output_);
  }
  std::string line() {
    char buffer[1024];
    return output_ && fgets(buffer, sizeof(buffer), output_) ? buffer : "";
  }
  void signal(int number) { kill(pid_, number); }
  // The exit status, or -1 when it did not exit within `limit_s`.
  int wait(double limit_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* output_ = nullptr;
};

TEST(CoordinatorCli, ServesStatusAndStopsOnSigterm) {
  Child coordinator({LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0", "--run-id", "cli-run",
                     "--min-replicas", "2"});
  const std::string banner = coordinator.line();
  std::smatch match;
  ASSERT_TRUE(std::regex_search(banner, match, std::regex("run cli-run on 127.0.0.1:([0-9]+)"))) << banner;
  httplib::Client client("127.0.0.1", std::stoi(match[1]));
  const auto status = client.Get("/status");
  ASSERT_TRUE(status) << "no answer";
  const auto json = nlohmann::json::parse(status->body);
  EXPECT_EQ(json.at("run_id"), "cli-run");
  EXPECT_EQ(json.at("rules").at("min_replicas"), 2);
  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(5), 0);
}

TEST(CoordinatorCli, ATakenPortAndBadOptionsAreClearErrors) {
  Child first({LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0"});
  std::smatch match;
  const std::string banner = first.line();
  ASSERT_TRUE(std::regex_search(banner, match, std::regex("127.0.0.1:([0-9]+)"))) << banner;
  const auto taken = test::run_loco({"coordinator", "--host", "127.0.0.1", "--port", match[1]});
  EXPECT_EQ(taken.exit_code, 1) << taken.output;
  EXPECT_NE(taken.output.find("cannot listen on 127.0.0.1:" + std::string(match[1])), std::string::npos) << taken.output;
  const auto bad = test::run_loco({"coordinator", "--heartbeat-timeout-s", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--heartbeat-timeout-s"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace loco
