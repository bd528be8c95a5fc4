// `loco launch --elastic` with a plain command as the ranks (no training): failed ranks start again as
// new members up to --max-restarts, the others go on, and the ranks find the launcher's coordinator (and
// which of their rank's processes they are) in their environment.
#include <gtest/gtest.h>

#include <regex>

#include "support/test_support.h"

namespace loco {
namespace {

// Rank 1 fails the first time it runs (a marker file remembers), then succeeds.
std::vector<std::string> launch(const test::ScratchDir& dir, int max_restarts) {
  const std::string marker = (dir / "failed-once").string();
  return {"launch", "--elastic", "--nproc", "2", "--max-restarts", std::to_string(max_restarts), "--", "sh", "-c",
          "if [ \"$LOCO_MEMBER_NAME\" = rank-1 ] && [ ! -f " + marker + " ]; then touch " + marker +
              "; exit 3; fi; echo \"ok $LOCO_MEMBER_NAME start $LOCO_RANK_START $LOCO_RUN_ID $LOCO_COORDINATOR\""};
}

TEST(LaunchElastic, AFailedRankStartsAgainAsANewMember) {
  test::ScratchDir dir;
  const auto r = test::run_loco(launch(dir, 1));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 exited with status 3; starting it again as a new member (restart 1 of 1)"),
            std::string::npos)
      << r.output;
  // A rank's n-th process is told n (a dist.churn schedule tells its lives apart by it).
  EXPECT_NE(r.output.find("[rank 1] ok rank-1 start 2 run-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0] ok rank-0 start 1 run-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("127.0.0.1:"), std::string::npos) << r.output;  // the launcher's coordinator
}

TEST(LaunchElastic, WithoutRestartsLeftTheOthersStillFinish) {
  test::ScratchDir dir;
  const auto r = test::run_loco(launch(dir, 0));
  EXPECT_EQ(r.exit_code, 0) << r.output;  // rank 0 finished the run
  EXPECT_NE(r.output.find("rank 1 exited with status 3; not restarted (--max-restarts 0 used)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("[rank 1] ok"), std::string::npos) << r.output;
}

// Audit round 13: a rank that fails again and again soon after its start waits longer each time (0, 0.5, 1, 2 s
// here), and each failed process is reaped at once: rank 0, still running, counts the launcher's zombie children
// (before: every failed process stayed a zombie until the launch ended, and under ulimit -u the restarts ran out of
// processes in 2 s and the launch killed the healthy ranks).
TEST(LaunchElastic, ARankFailingAgainAndAgainWaitsAndLeavesNoZombies) {
  const auto r =
      test::run_loco_within(120, {"launch", "--elastic", "--nproc", "2", "--max-restarts", "4", "--", "sh", "-c",
                                  "if [ \"$LOCO_MEMBER_NAME\" = rank-1 ]; then exit 3; fi; sleep 8; "
                                  "echo zombies $(awk -v p=$PPID '$4 == p && $3 == \"Z\" { n++ } END { print n + 0 }' "
                                  "/proc/[0-9]*/stat 2>/dev/null)"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 exited with status 3; starting it again as a new member (restart 1 of 4)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(restart 3 of 4) in 1 s: it failed 3 times in a row soon after its start"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("not restarted (--max-restarts 4 used)"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\[rank 0\\] zombies [01]\n"))) << r.output;
}

// A rank whose command or config is refused (exit 2) would be refused again: it is not restarted, and the others go
// on (before: started again --max-restarts times at once).
TEST(LaunchElastic, ARankWhoseCommandIsRefusedIsNotRestarted) {
  const auto r = test::run_loco({"launch", "--elastic", "--nproc", "2", "--max-restarts", "5", "--", "sh", "-c",
                                 "if [ \"$LOCO_MEMBER_NAME\" = rank-1 ]; then exit 2; fi; echo ok"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 exited with status 2: its command or config was refused, and would be again; not "
                          "restarted; the other ranks go on"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("restart 1 of 5"), std::string::npos) << r.output;
}

// Its coordinator admits only its own ranks: a quorum of more can never form, so the launch is refused at once
// (before: every rank waited comm.timeout_s for it, and was started again --max-restarts times).
TEST(LaunchElastic, MoreMinReplicasThanRanksIsRefused) {
  const auto r = test::run_loco({"launch", "--elastic", "--nproc", "2", "--min-replicas", "5", "--", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--min-replicas 5 is more than the 2 ranks this launch starts"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("coordinator of elastic run"), std::string::npos) << r.output;  // nothing started
}

// --master-port is where the launcher's coordinator serves the run's store (before: ignored, the store on any
// free port): a port already taken is refused by name before any rank starts.
TEST(LaunchElastic, MasterPortIsTheStorePort) {
  const test::ListeningSocket taken;
  const std::string port = std::to_string(taken.port());
  const auto r =
      test::run_loco_within(60, {"launch", "--elastic", "--nproc", "2", "--master-port", port, "--", "true"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(port), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank 0]"), std::string::npos) << r.output;  // no rank started
}

// Under a coordinator of its own the store is that coordinator's: --master-port could only mislead.
TEST(LaunchElastic, MasterPortUnderAnotherCoordinatorIsRefused) {
  ::setenv("LOCO_COORDINATOR", "127.0.0.1:9", 1);
  const auto r = test::run_loco({"launch", "--elastic", "--nproc", "2", "--master-port", "29555", "--", "true"});
  ::unsetenv("LOCO_COORDINATOR");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--master-port 29555 has no use here: LOCO_COORDINATOR=127.0.0.1:9"), std::string::npos)
      << r.output;
}

// The launch options are checked before the launcher serves a coordinator.
TEST(LaunchElastic, BadLaunchOptionsAreRefusedBeforeTheCoordinatorStarts) {
  const auto r = test::run_loco({"launch", "--elastic", "--nproc", "0", "--", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--nproc 0 must be at least 1"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("coordinator of elastic run"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace loco
