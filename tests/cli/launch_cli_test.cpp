// `loco launch` as a user runs it: every rank's environment, output prefixed in whole lines, a
// failing rank stopping the others (and what they started) quickly, signals to the launcher, ranks
// dying with the launcher, unrunnable commands, bad options, a free port, and a loco subcommand.
// Ranks are small `/bin/sh -c` scripts that write their PIDs to files, so that tests can check
// that nothing outlives the launcher.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include "support/test_support.h"

namespace loco::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<std::string> launch_sh(std::vector<std::string> options, const std::string& script,
                                   const std::string& arg = "") {
  std::vector<std::string> args{"launch"};
  args.insert(args.end(), options.begin(), options.end());
  for (const char* word : {"--", "/bin/sh", "-c"}) args.emplace_back(word);
  args.push_back(script);
  if (!arg.empty()) args.insert(args.end(), {"sh", arg});  // $0 and $1 of the script
  return args;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Gone: no such process, or a zombie nobody has reaped yet (it runs nothing).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::string stat = read_text(fs::path("/proc") / std::to_string(pid) / "stat");
  auto state = stat.find(") ");
  return state != std::string::npos && stat[state + 2] == 'Z';
}

// Reads the PIDs the ranks' scripts wrote to `dir/<name>` and expects them all gone soon.
void expect_gone(const fs::path& dir, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    std::string text = read_text(dir / name);
    ASSERT_FALSE(text.empty()) << name << " was not written";
    pid_t pid = std::stoi(text);
    EXPECT_TRUE(eventually([pid] { return process_gone(pid); }, std::chrono::seconds(2)))
        << name << " (pid " << pid << ") outlived the launcher";
  }
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The command's options before the "--", with or without one, are named as such (docs/errors.md); with a "--"
// CLI11 blamed the command's first word, which was in its place. Nothing is started.
TEST(LaunchCli, TheCommandsOptionsBeforeTheSeparatorAreNamed) {
  const std::vector<std::vector<std::string>> cases{{"launch", "--nproc", "2", "--config", "run.toml", "--", "train"},
                                                    {"launch", "--nproc", "2", "--config=run.toml", "--", "train"},
                                                    {"launch", "--nproc", "2", "--config", "run.toml"}};
  for (const auto& args : cases) {
    const CommandResult r = run_loco(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("loco launch has no option --config: put the command to launch, with its options, after "
                            "'--'"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("starting rank"), std::string::npos) << r.output;
  }
}

TEST(LaunchCli, EachRankSeesItsEnvironment) {
  const std::string script =
      R"(echo "r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE a=$MASTER_ADDR p=$MASTER_PORT")";
  auto r = run_loco(launch_sh({"--nproc", "3", "--master-port", "29555"}, script));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(rank) + "] r=" + std::to_string(rank) +
                                       " w=3 l=" + std::to_string(rank) + " lw=3 a=127.0.0.1 p=29555\n"))
        << r.output;
  }

  // Node 1 of 2 starts global ranks 2 and 3.
  r = run_loco(launch_sh({"--nproc", "2", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.1.2.3"}, script));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 2] r=2 w=4 l=0 lw=2 a=10.1.2.3 p=29500\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 3] r=3 w=4 l=1 lw=2 a=10.1.2.3 p=29500\n")) << r.output;
}

TEST(LaunchCli, OutputComesInWholeLinesPrefixedByRank) {
  ScratchDir dir;
  // seq writes in 4 KiB blocks that split lines: the launcher must put them back together.
  const std::string script = R"(seq -f "line $RANK %g of many words" 20000; echo "err $RANK" >&2; printf "tail $RANK")";
  pid_t pid = start_loco(launch_sh({"--nproc", "2"}, script), dir / "out", dir / "err");
  ASSERT_EQ(wait_exit(pid), 0) << read_text(dir / "err");

  std::istringstream out(read_text(dir / "out"));
  const std::regex line_pattern(R"(\[rank (\d)\] line (\d) (\d+) of many words)");
  int next[2] = {1, 1};
  bool tail[2] = {false, false};
  for (std::string line; std::getline(out, line);) {
    std::smatch m;
    if (std::regex_match(line, m, line_pattern) && m[1] == m[2]) {
      int rank = std::stoi(m[1]);
      ASSERT_EQ(std::stoi(m[3]), next[rank]++) << line;
    } else if (line == "[rank 0] tail 0" || line == "[rank 1] tail 1") {
      tail[line[6] - '0'] = true;
    } else {
      FAIL() << "not a whole prefixed line: '" << line << "'";
    }
  }
  EXPECT_EQ(next[0], 20001);
  EXPECT_EQ(next[1], 20001);
  EXPECT_TRUE(tail[0] && tail[1]) << "an unfinished last line was lost";
  std::string err = read_text(dir / "err");
  EXPECT_TRUE(contains(err, "[rank 0] err 0\n") && contains(err, "[rank 1] err 1\n")) << err;
}

TEST(LaunchCli, FailingRankStopsTheOthersAndWhatTheyStarted) {
  ScratchDir dir;
  // Ranks 0 and 2 start a background sleep (a grandchild that holds the output pipe) and wait;
  // rank 1 fails with status 3 once they are ready.
  const std::string script = R"(cd "$1"
if [ "$RANK" = 1 ]; then
  while [ ! -e ready_0 ] || [ ! -e ready_2 ]; do sleep 0.05; done
  echo "rank 1 gives up" >&2; exit 3
fi
sleep 60 & echo $! > sleep_$RANK; echo $$ > sh_$RANK; touch ready_$RANK; wait)";
  auto start = Clock::now();
  auto r = run_loco(launch_sh({"--nproc", "3"}, script, dir.path().string()));
  EXPECT_LT(seconds_since(start), 20.0) << r.output;  // not waiting out the 60 s sleeps; loose for loaded machines
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 1] rank 1 gives up\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "loco launch: rank 1 exited with status 3; stopping the other ranks")) << r.output;
  expect_gone(dir.path(), {"sh_0", "sleep_0", "sh_2", "sleep_2"});
}

TEST(LaunchCli, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  ScratchDir dir;
  const std::string script = R"(cd "$1"
if [ "$RANK" = 1 ]; then
  while [ ! -e ready_0 ]; do sleep 0.05; done; exit 4
fi
trap "" TERM; sleep 60 & echo $! > sleep_0; echo $$ > sh_0; touch ready_0; wait)";
  auto start = Clock::now();
  auto r = run_loco(launch_sh({"--nproc", "2", "--grace-s", "1"}, script, dir.path().string()));
  double elapsed = seconds_since(start);
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_GE(elapsed, 1.0) << r.output;
  EXPECT_LT(elapsed, 5.0) << r.output;
  EXPECT_TRUE(contains(r.output, "SIGKILL after 1 s")) << r.output;
  expect_gone(dir.path(), {"sh_0", "sleep_0"});
}

TEST(LaunchCli, RankKilledBySignalIsReported) {
  auto start = Clock::now();
  auto r = run_loco(launch_sh({"--nproc", "2"}, R"(if [ "$RANK" = 1 ]; then kill -USR1 $$; fi; sleep 60)"));
  EXPECT_LT(seconds_since(start), 20.0) << r.output;  // not waiting out the 60 s sleeps; loose for loaded machines
  EXPECT_EQ(r.exit_code, 128 + SIGUSR1) << r.output;
  EXPECT_TRUE(contains(r.output, "loco launch: rank 1 was killed by SIGUSR1")) << r.output;
}

TEST(LaunchCli, UnrunnableCommandIsReported) {
  ScratchDir dir;
  write_text(dir / "not_executable", "#!/bin/sh\necho hi\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"no-such-program-on-path-loco-test", "No such file or directory"},
      {(dir / "not_executable").string(), "Permission denied"}};
  for (const auto& [program, reason] : cases) {
    auto start = Clock::now();
    auto r = run_loco({"launch", "--nproc", "2", "--", program, "arg"});
    EXPECT_LT(seconds_since(start), 20.0) << r.output;  // fails at once; the bound is loose for loaded machines
    EXPECT_EQ(r.exit_code, 127) << r.output;
    EXPECT_TRUE(contains(r.output, "] loco launch: cannot run '" + program + "': " + reason)) << r.output;
    EXPECT_TRUE(contains(r.output, "exited with status 127: could not run '" + program + "'")) << r.output;
  }
}

// Runs `loco launch OPTIONS` for each case and expects exit 2 with the case's message, before any
// rank starts.
void expect_config_errors(const std::vector<std::pair<std::vector<std::string>, std::string>>& cases) {
  for (const auto& [options, message] : cases) {
    std::vector<std::string> args{"launch"};
    args.insert(args.end(), options.begin(), options.end());
    auto r = run_loco(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, message)) << r.output;
    EXPECT_FALSE(contains(r.output, "starting ranks")) << r.output;
  }
}

TEST(LaunchCli, RankCountsOutOfRangeAreConfigErrors) {
  expect_config_errors({
      {{"--nproc", "0", "--", "true"}, "--nproc 0 must be at least 1"},
      {{"--nproc", "100000", "--", "true"}, "--nproc 100000 is more ranks than one node runs (at most 1024)"},
      {{"--nnodes", "0", "--", "true"}, "--nnodes 0 must be at least 1"},
      {{"--nnodes", "2", "--node-rank", "2", "--", "true"}, "--node-rank 2 must be 0 to 1"},
  });
}

TEST(LaunchCli, PortAndGraceOutOfRangeAreConfigErrors) {
  expect_config_errors({
      {{"--master-port", "70000", "--", "true"}, "--master-port 70000 must be 1 to 65535"},
      {{"--grace-s", "-1", "--", "true"}, "--grace-s -1 must be 0 or more"},
      {{"--grace-s", "1e10", "--", "true"}, "--grace-s 10000000000 must be 0 or more seconds, at most 1000000"},
  });
}

TEST(LaunchCli, MissingOrMisplacedCommandIsAConfigError) {
  expect_config_errors({
      {{"--nproc", "2"}, "no command to launch: give it after '--'"},
      {{"--nproc", "2", "--"}, "no command to launch"},
      {{"--nproc", "2", "echo", "--bogus"},
       "no option --bogus: put the command to launch, with its options, after '--'"},
      // An elastic launch's options without --elastic (before: ignored).
      {{"--nproc", "2", "--max-restarts", "5", "--", "true"}, "--max-restarts applies to an elastic launch only"},
      {{"--nproc", "2", "--min-replicas", "2", "--", "true"}, "--min-replicas applies to an elastic launch only"},
  });
}

TEST(LaunchCli, UnusableMasterAddressOrPortIsAConfigError) {
  expect_config_errors({
      {{"--nnodes", "2", "--master-port", "0", "--", "true"}, "--master-port 0 picks a free port on this host"},
      {{"--master-port", "0", "--master-addr", "192.0.2.1", "--", "true"}, "cannot bind a port on --master-addr"},
      {{"--master-addr", "", "--", "true"}, "--master-addr is empty"},
  });
}

TEST(LaunchCli, MasterPortZeroGivesAFreePort) {
  auto r = run_loco(launch_sh({"--nproc", "2", "--master-port", "0"}, R"(echo "port=$MASTER_PORT")"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(\[rank 0\] port=(\d+))"))) << r.output;
  int port = std::stoi(m[1]);
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
  EXPECT_TRUE(contains(r.output, "[rank 1] port=" + std::to_string(port) + "\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "master 127.0.0.1:" + std::to_string(port))) << r.output;
  // Usable: rank 0 could bind it (and now we can).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  ::close(fd);
}

TEST(LaunchCli, RunsALocoSubcommand) {
  auto r = run_loco({"launch", "--nproc", "2", "--", "simulate", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 0] ") && contains(r.output, "[rank 1] ")) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\[rank 1\] +--calibrate)"))) << r.output;
  EXPECT_FALSE(contains(r.output, "Ranks to start on this node")) << "launch's own help: " << r.output;
}

TEST(LaunchCli, LocoSubcommandErrorBecomesTheStatus) {
  auto r = run_loco({"launch", "--", "simulate", "--params", "1e9"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "] loco: error: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "exited with status 2")) << r.output;
}

TEST(LaunchCli, SigintToTheLauncherReachesEveryRank) {
  ScratchDir dir;
  const std::string script = R"(cd "$1"
trap 'echo "rank $RANK got SIGINT"; exit 5' INT
touch ready_$RANK
while :; do sleep 0.05; done)";
  pid_t pid = start_loco(launch_sh({"--nproc", "2"}, script, dir.path().string()), dir / "out", dir / "err");
  ASSERT_TRUE(
      eventually([&] { return fs::exists(dir / "ready_0") && fs::exists(dir / "ready_1"); }, std::chrono::seconds(5)));
  auto start = Clock::now();
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 128 + SIGINT) << read_text(dir / "err");
  EXPECT_LT(seconds_since(start), 5.0);
  std::string out = read_text(dir / "out");
  EXPECT_TRUE(contains(out, "[rank 0] rank 0 got SIGINT\n") && contains(out, "[rank 1] rank 1 got SIGINT\n")) << out;
  EXPECT_TRUE(contains(read_text(dir / "err"), "loco launch: received SIGINT")) << read_text(dir / "err");
}

TEST(LaunchCli, SigtermToTheLauncherStopsTheRanks) {
  ScratchDir dir;
  pid_t pid =
      start_loco(launch_sh({"--nproc", "2"}, R"(cd "$1"; sleep 60 & echo $! > sleep_$RANK; wait)", dir.path().string()),
                 dir / "out", dir / "err");
  ASSERT_TRUE(
      eventually([&] { return fs::exists(dir / "sleep_0") && fs::exists(dir / "sleep_1"); }, std::chrono::seconds(5)));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 128 + SIGTERM) << read_text(dir / "err");
  expect_gone(dir.path(), {"sleep_0", "sleep_1"});
}

TEST(LaunchCli, RanksDieWithTheLauncher) {
  ScratchDir dir;
  pid_t pid =
      start_loco(launch_sh({"--nproc", "2"}, R"(cd "$1"; echo $$ > rank_$RANK; exec sleep 60)", dir.path().string()),
                 dir / "out", dir / "err");
  ASSERT_TRUE(
      eventually([&] { return fs::exists(dir / "rank_0") && fs::exists(dir / "rank_1"); }, std::chrono::seconds(5)));
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  expect_gone(dir.path(), {"rank_0", "rank_1"});
}

}  // namespace
}  // namespace loco::test
