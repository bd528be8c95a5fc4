// run_on_threads: a thread the system refuses ends in an Error naming the setting, after the threads already
// running were told and joined; before, the vector of unjoined threads ended the process ("terminate called
// without an active exception", SIGABRT) at 150 replicas under a 3 GB address-space limit.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "loco/util/run_on_threads.h"

namespace loco {
namespace {

TEST(RunOnThreads, RunsEveryBodyOnce) {
  std::atomic<int> sum{0};
  run_on_threads(
      8, [&](int i) { sum += i + 1; }, [](int) { ADD_FAILURE() << "a thread was refused"; }, "the test");
  EXPECT_EQ(sum, 36);
}

// In a child process whose address space leaves room for a few thread stacks (8 MiB each) only.
TEST(RunOnThreads, AThreadTheSystemRefusesIsAnErrorAfterTheOthersAreTold) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_AS, &limit);
    long pages = 0;
    if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(statm, "%ld", &pages) != 1) pages = 0;
      std::fclose(statm);
    }
    limit.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (64u << 20);
    if (pages == 0 || ::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    std::atomic<bool> told{false};
    std::atomic<int> refused{0}, ran{0};
    try {
      run_on_threads(
          64,
          [&](int) {
            ++ran;
            // Held until a refusal is told (or 10 s: every thread fit, and the child says so below).
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!told && std::chrono::steady_clock::now() < give_up) {
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
          },
          [&](int) {
            ++refused;
            told = true;
          },
          "dist.replicas");
    } catch (const Error& e) {
      const std::string what = e.what();
      const bool named = what.find("of the 64 that dist.replicas asks for") != std::string::npos;
      ::_exit(named && refused > 0 && ran + refused == 64 ? 0 : 4);
    }
    ::_exit(5);  // every thread started: the limit did not bite
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace loco
