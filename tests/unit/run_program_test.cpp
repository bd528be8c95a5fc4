#include "loco/util/run_program.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "loco/util/error.h"
#include "support/test_support.h"

namespace loco {
namespace {

using test::ScratchDir;

TEST(RunProgram, ReturnsTheExitStatusWithTheOutputInItsFile) {
  ScratchDir dir;
  const auto out = dir / "out.txt";
  EXPECT_EQ(run_program({"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"}, {out, out, false}), 3);
  EXPECT_EQ(test::read_text(out), "hello\noops\n");
  EXPECT_EQ(run_program({"/bin/sh", "-c", "echo again"}, {out, out, true}), 0);
  EXPECT_EQ(test::read_text(out), "hello\noops\nagain\n");
  EXPECT_EQ(run_program({"/bin/sh", "-c", "kill -KILL $$"}, {out, out, false}), 128 + SIGKILL);
}

TEST(RunProgram, AProgramThatCannotStartIsNamed) {
  ScratchDir dir;
  try {
    run_program({(dir / "absent").string()}, {dir / "out", dir / "out", false});
    ADD_FAILURE() << "started a program that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start " + (dir / "absent").string() + ": No such file or directory"),
              std::string::npos)
        << e.what();
  }
  try {
    run_program({"/bin/true"}, {dir / "no" / "such" / "dir" / "out", dir / "out", false});
    ADD_FAILURE() << "started with an output file that cannot be opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start /bin/true: No such file or directory"), std::string::npos)
        << e.what();
  }
}

// A stop reaches the programs running (a sweep's runs) and starts no other.
TEST(RunProgram, StoppedProgramsGetTheSignalAndNoOtherStarts) {
  ScratchDir dir;
  StoppablePrograms programs;
  int status = -1;
  std::thread runner([&] {
    status =
        run_program({"/bin/sh", "-c", "echo started; exec sleep 60"}, {dir / "out", dir / "out", false}, &programs);
  });
  ASSERT_TRUE(test::eventually([&] { return test::read_text(dir / "out") == "started\n"; }, std::chrono::seconds(20)));
  const auto start = std::chrono::steady_clock::now();
  programs.stop(SIGTERM);
  runner.join();
  EXPECT_EQ(status, 128 + SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(programs.stopped(), SIGTERM);
  EXPECT_EQ(run_program({"/bin/sh", "-c", "echo ran > " + (dir / "later").string()}, {dir / "out", dir / "out", false},
                        &programs),
            128 + SIGTERM);
  EXPECT_FALSE(std::filesystem::exists(dir / "later"));
}

// That a program gets SIGTERM when loco dies is tested with a sweep killed outright
// (SweepCli.AStoppedSweepLeavesNoRunBehind).

}  // namespace
}  // namespace loco
