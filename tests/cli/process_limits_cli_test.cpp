// loco under the process limits a shell or a container sets (audit round 12): a stack, descriptors or threads
// too few to run on are refused by name, a soft limit below the hard one is raised, and a path too long for a
// run's checkpoints is refused before the run trains. Before: SIGSEGV, a hang deaf to SIGTERM, libtorch's own
// words, and a run that failed at its first checkpoint.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/test_support.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

class ProcessLimitsCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    test::prepare_tiny_byte_data(dir_->path());
    test::write_text(*dir_ / "run.toml", test::tiny_model_toml((*dir_ / "data").string()) +
                                             "[optim]\nwarmup_steps = 1\n[train]\nsteps = 2\nbatch_size = 2\n"
                                             "eval_every = 0\neval_batches = 1\nthreads = 1\n");
    // A user other than root (root passes RLIMIT_NPROC), who may write the runs' directory.
    fs::permissions(dir_->path(), fs::perms::all);
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::vector<std::string> train_into(const std::string& name) {
    return {"train", "--config", (*dir_ / "run.toml").string(), "--set", "train.out_dir=" + (*dir_ / name).string()};
  }

  // Runs a command as uid 54321 (no account, so no other processes), as `setpriv` does in a shell.
  static constexpr const char* kAsOtherUser = "/usr/bin/setpriv --reuid 54321 --regid 54321 --clear-groups";
  // Why the tests that run loco as another user cannot run here; "" when they can.
  static std::string other_user_cannot_run() {
    if (::geteuid() != 0 || !fs::exists("/usr/bin/setpriv")) return "needs root and setpriv (util-linux)";
    const std::string check =
        fmt::format("{} /usr/bin/test -x {} -a -r {}", kAsOtherUser, LOCO_BINARY, (*dir_ / "run.toml").string());
    if (std::system(check.c_str()) != 0) {
      return fmt::format("another user cannot run {} here (a directory above it is private)", LOCO_BINARY);
    }
    return "";
  }

  static ScratchDir* dir_;
};
ScratchDir* ProcessLimitsCli::dir_ = nullptr;

TEST_F(ProcessLimitsCli, AStackTooSmallIsRaisedWhereItMayBeAndRefusedWhereNot) {
  // Soft 128 KiB under an unlimited hard limit: raised, and the run trains (before: SIGSEGV in its first step).
  const auto raised = test::run_loco_under(120, "/usr/bin/prlimit --stack=131072:unlimited", train_into("stack"));
  EXPECT_EQ(raised.exit_code, 0) << raised.output;
  const auto refused = test::run_loco_under(60, "/usr/bin/prlimit --stack=262144:262144", train_into("no-stack"));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("the stack is limited to 256 KiB (ulimit -s), and loco needs at least 1024 KiB"),
            std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(*dir_ / "no-stack"));
}

TEST_F(ProcessLimitsCli, TooFewFileDescriptorsAreNamed) {
  const auto refused = test::run_loco_under(60, "/usr/bin/prlimit --nofile=16:16", train_into("no-files"));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("the process may open 16 file descriptors (ulimit -n), and loco needs at least 32"),
            std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(*dir_ / "no-files"));
}

TEST_F(ProcessLimitsCli, TooFewThreadsAreNamedInsteadOfHanging) {
  if (const std::string why = other_user_cannot_run(); !why.empty()) GTEST_SKIP() << why;
  // uid 54321 (no account, so no other processes): `timeout` and loco take 2 of its 4 tasks, too few for
  // libtorch's pool (before: a hang in torch::set_num_threads, deaf to SIGTERM, killed here at 60 s). OpenBLAS is
  // held to one thread: on a machine of many cores its own pool, started before main, would not fit (left open).
  const auto refused = test::run_loco_under(
      60, std::string(kAsOtherUser) + " /usr/bin/env OPENBLAS_NUM_THREADS=1 /usr/bin/prlimit --nproc=4:4",
      train_into("no-threads"));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("cannot start a thread"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("(ulimit -u)"), std::string::npos) << refused.output;
}

// Audit round 14: a run directory its (non-root) owner may write but not read (mode 0300) is named with the fix
// before anything is written (before: "cannot open … to sync it: Permission denied", a config.toml left).
TEST_F(ProcessLimitsCli, ARunDirectoryThatCannotBeReadIsNamedBeforeAnythingIsWritten) {
  if (const std::string why = other_user_cannot_run(); !why.empty()) GTEST_SKIP() << why;
  const fs::path unreadable = *dir_ / "write-only";
  fs::create_directory(unreadable);
  ASSERT_EQ(::chown(unreadable.c_str(), 54321, 54321), 0);
  fs::permissions(unreadable, fs::perms::owner_write | fs::perms::owner_exec);
  const auto refused = test::run_loco_under(60, kAsOtherUser, train_into("write-only"));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("train.out_dir '" + unreadable.string() +
                                "' cannot be read (Permission denied): loco reads the directory to sync what it "
                                "writes and to find its files again. Give yourself read permission"),
            std::string::npos)
      << refused.output;
  fs::permissions(unreadable, fs::perms::owner_all);
  EXPECT_TRUE(fs::is_empty(unreadable)) << "something was written";
}

TEST_F(ProcessLimitsCli, ARunDirectoryTooDeepForItsCheckpointsIsRefusedBeforeTraining) {
  fs::path deep = dir_->path();
  while (deep.string().size() < 4000) deep /= std::string(200, 'd');
  const auto refused = test::run_loco_within(60, train_into(fs::relative(deep, dir_->path()).string()));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("would pass the 4096 a path may have (PATH_MAX): choose a shorter train.out_dir"),
            std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(*dir_ / std::string(200, 'd')));
}

}  // namespace
}  // namespace loco
