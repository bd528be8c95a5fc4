// `loco bench allreduce` end to end, and the rendezvous errors a user meets first: a port already in
// use and a master that cannot be reached give a clear message within the timeout, not a hang.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "support/test_support.h"

namespace loco::test {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<nlohmann::json> json_lines(const std::string& output) {
  std::vector<nlohmann::json> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.front() == '{') rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

// Makes the loco processes this test starts one rank of a run; undone when the test ends.
class RankEnvironment {
 public:
  RankEnvironment(int rank, int world_size, int port) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  }
  ~RankEnvironment() {
    for (const char* variable : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(variable);
  }
};

// A port nobody listens on once the probe that found it is closed.
int unused_port() {
  ListeningSocket probe;
  return probe.port();
}

// `loco bench allreduce` of one small all-reduce over Gloo, waiting at most `timeout_s` for its peers: the rank
// tests start it as rank processes and watch how they meet.
std::vector<std::string> small_gloo_bench(int timeout_s) {
  return {"bench",   "allreduce", "--backend", "gloo", "--timeout-s", std::to_string(timeout_s),
          "--sizes", "1KiB",      "--repeats", "1",    "--codec",     "fp32"};
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST(BenchAllReduceCli, LocalRanksPrintVerifiedRowsWithTheRingBound) {
  const auto result =
      run_loco({"bench", "allreduce", "--backend", "local", "--nproc", "3", "--sizes", "4KiB", "--codec", "fp32,fp4",
                "--bandwidth-mbps", "100", "--latency-ms", "5", "--repeats", "1", "--round-kib", "off"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto rows = json_lines(result.output);
  ASSERT_EQ(rows.size(), 2u) << result.output;
  EXPECT_EQ(rows[0]["codec"], "fp32");
  EXPECT_EQ(rows[0]["path"], "ring");
  EXPECT_EQ(rows[0]["size_bytes"], 4096);
  EXPECT_EQ(rows[0]["wire_bytes"], 2 * 2 * 4096 / 3);  // ring: 2·(N−1)/N of the tensor
  // 2·(N−1)/N·4096 bytes at 100 Mbit/s + 2·(N−1) rounds of 5 ms.
  EXPECT_NEAR(rows[0]["bound_s"].get<double>(), 2.0 * 2 / 3 * 4096 * 8 / 100e6 + 4 * 0.005, 1e-12);
  EXPECT_EQ(rows[1]["codec"], "fp4");
  EXPECT_LT(rows[1]["wire_bytes"].get<double>() * 7, rows[0]["wire_bytes"].get<double>());
  for (const auto& row : rows) EXPECT_TRUE(row["verified"].get<bool>()) << row.dump();
}

// --round-kib (comm.round_kib): fp32 leaves the ring for the paced exchange, and the rows say how.
TEST(BenchAllReduceCli, PacedRowsReportRoundsAndPhases) {
  const auto result = run_loco({"bench", "allreduce", "--backend", "local", "--nproc", "2", "--sizes", "64KiB",
                                "--codec", "fp32,int8", "--repeats", "1", "--round-kib", "4"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto rows = json_lines(result.output);
  ASSERT_EQ(rows.size(), 2u) << result.output;
  for (const auto& row : rows) {
    EXPECT_EQ(row["path"], "pieces") << row.dump();
    EXPECT_EQ(row["round_kib"], 4.0) << row.dump();
    EXPECT_TRUE(row["verified"].get<bool>()) << row.dump();
    EXPECT_GE(row["reduce_scatter_s"].get<double>(), 0.0) << row.dump();
  }
  EXPECT_EQ(rows[0]["rounds"], 2 * 8);  // 32 KiB pieces of fp32 in 4 KiB rounds, both phases
  EXPECT_EQ(rows[0]["wire_bytes"], 65536);  // half the tensor each phase
  auto bad = run_loco({"bench", "allreduce", "--round-kib", "fast"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--round-kib"), std::string::npos) << bad.output;
}

TEST(BenchAllReduceCli, GlooStartsItsOwnRanks) {
  const auto result = run_loco({"bench", "allreduce", "--backend", "gloo", "--nproc", "2", "--sizes", "64KiB",
                                "--codec", "fp32,int8", "--repeats", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto rows = json_lines(result.output);
  ASSERT_EQ(rows.size(), 2u) << result.output;
  for (const auto& row : rows) {
    EXPECT_EQ(row["backend"], "gloo");
    EXPECT_EQ(row["nproc"], 2);
    EXPECT_TRUE(row["verified"].get<bool>()) << row.dump();
  }
}

TEST(BenchAllReduceCli, BadArgumentsAreConfigErrors) {
  auto result = run_loco({"bench", "allreduce", "--codec", "fp3"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("fp32, bf16, int8, fp4, int4"), std::string::npos) << result.output;
  result = run_loco({"bench", "allreduce", "--sizes", "4 parsecs"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  result = run_loco({"bench", "allreduce", "--nproc", "2", "--bandwidth-mbps", "1,2,3"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("3 values for 2 ranks"), std::string::npos) << result.output;
  result = run_loco({"bench", "allreduce", "--backend", "local", "--nproc", "100000"});  // threads, not processes
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--nproc 100000: give 1 to 1024 ranks"), std::string::npos) << result.output;
  // Bounded as train bounds them (audit round 3: threads until 0.9 GB, days of repeats, a 31-year latency).
  const std::vector<std::pair<std::vector<std::string>, std::string>> unbounded = {
      {{"--threads", "100000"}, "--threads 100000: give 1 to 4096 threads per rank"},
      {{"--repeats", "2000000000"}, "give 1 to 10000 repetitions"},
      {{"--latency-ms", "1e12", "--delay", "latency"}, "--latency-ms: 1000000000000 ms is more than a minute one way"},
      {{"--bandwidth-mbps", "1e-300"}, "--bandwidth-mbps: 1e-300 Mbit/s is outside what a link carries"},
      {{"--block-size", "9223372036854775807"}, "codec block size must be from 1 to 1048576"},
      {{"--timeout-s", "1e30"}, "give a positive number of seconds, at most 1000000"},
      // 2^64 bytes became a negative tensor size ("unexpected error"); 1000 GB per rank, beyond this machine,
      // would grow until the kernel killed the process.
      {{"--sizes", "18446744073709551615"}, "is more than 1 TiB per rank"},
      {{"--sizes", "1MB,1000GB"}, "--sizes 1MB,1000GB: 2 rank(s) in this process hold at least 7450.6 GiB"},
      // No float32 value: the bench reported a time for 0 bytes.
      {{"--sizes", "1MB,1B"}, "size '1B' in '1MB,1B' is less than one float32 value (4 bytes)"},
      // A unit of another scale is named as such (before: "is not a byte count").
      {{"--sizes", "1TB"},
       "size '1TB' in '1TB' has the unit 'TB', which is none of B, KB, MB, GB, KiB, MiB, GiB, K, M"}};
  for (const auto& [options, says] : unbounded) {
    std::vector<std::string> args = {"bench", "allreduce", "--backend", "local", "--nproc", "2"};
    args.insert(args.end(), options.begin(), options.end());
    result = run_loco_within(60, args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(says), std::string::npos) << result.output;
  }
}

// The local backend's ranks are its --nproc threads, inside a launcher's job too (before: its link was checked
// against the job's WORLD_SIZE, and "100,200" for 2 threads was "2 values for 4 ranks").
TEST(CommCli, ALocalBenchInsideALaunchedJobHasItsOwnRanks) {
  RankEnvironment environment(0, 4, 1);
  const auto result =
      run_loco_within(120, {"bench", "allreduce", "--backend", "local", "--nproc", "2", "--sizes", "4KB", "--codec",
                            "fp32", "--bandwidth-mbps", "100,200", "--repeats", "1", "--warmup", "0"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(RendezvousCli, PortInUseIsReportedAtOnce) {
  ListeningSocket taken;
  RankEnvironment environment(0, 2, taken.port());
  const auto start = Clock::now();
  const auto result = run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "20", "--sizes", "1KiB"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("already in use"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("MASTER_PORT"), std::string::npos) << result.output;
  EXPECT_LT(seconds_since(start), 15.0);
}

// A store that closes every connection it accepts (a store front whose connections are all taken does): the
// store's calls fail with libtorch's own error, which is a CommError naming the rendezvous (retried by elastic
// members), not "unexpected error: Broken pipe".
TEST(RendezvousCli, AStoreThatClosesTheConnectionIsACommError) {
  ListeningSocket store;
  std::atomic<bool> done{false};
  std::thread closer([&] {
    while (!done) {
      pollfd waiting{store.fd(), POLLIN, 0};
      if (::poll(&waiting, 1, 100) <= 0) continue;
      const int client = ::accept(store.fd(), nullptr, nullptr);
      if (client >= 0) ::close(client);
    }
  });
  RankEnvironment environment(1, 2, store.port());
  const auto result = run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "5", "--sizes", "1KiB"});
  done = true;
  closer.join();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_EQ(result.output.find("unexpected error"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("127.0.0.1:" + std::to_string(store.port())), std::string::npos) << result.output;
}

// A host that does not resolve is named with the resolver's answer at the timeout (before: "check that rank 0 is
// running"), an interface this machine lacks at once (before: Gloo's "[enforce fail at …] ifa != nullptr").
TEST(RendezvousCli, AnUnknownHostOrInterfaceIsNamed) {
  RankEnvironment environment(1, 2, 29999);
  ::setenv("MASTER_ADDR", "no.such.host.invalid", 1);
  const auto start = Clock::now();
  auto result = run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "3", "--sizes", "1KiB"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("rank 1 could not resolve the rendezvous host 'no.such.host.invalid' (MASTER_ADDR) "
                               "within 3"),
            std::string::npos)
      << result.output;
  EXPECT_LT(seconds_since(start), 30.0);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("LOCO_SOCKET_IFNAME", "nosuchif0", 1);
  result = run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "5", "--sizes", "1KiB"});
  ::unsetenv("LOCO_SOCKET_IFNAME");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("LOCO_SOCKET_IFNAME=nosuchif0 names no network interface of this machine (its "
                               "interfaces with an address: lo (127.0.0.1)"),
            std::string::npos)
      << result.output;
  // An interface that exists without an address (down, or not configured; audit round 14: Gloo's "[enforce fail
  // at …] ifa != nullptr. Unable to find address for: ifb0"), where this machine has one.
  std::set<std::string> addressed;
  ifaddrs* all = nullptr;
  ASSERT_EQ(::getifaddrs(&all), 0);
  for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) {
      addressed.insert(i->ifa_name);
    }
  }
  ::freeifaddrs(all);
  std::string bare;
  if (struct if_nameindex* interfaces = ::if_nameindex()) {
    for (const struct if_nameindex* i = interfaces; i->if_index != 0 && bare.empty(); ++i) {
      if (addressed.count(i->if_name) == 0) bare = i->if_name;
    }
    ::if_freenameindex(interfaces);
  }
  if (bare.empty()) return;  // every interface here has an address
  ::setenv("LOCO_SOCKET_IFNAME", bare.c_str(), 1);
  result = run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "5", "--sizes", "1KiB"});
  ::unsetenv("LOCO_SOCKET_IFNAME");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("LOCO_SOCKET_IFNAME=" + bare +
                               " names an interface without an IP address (down, or "
                               "not configured)"),
            std::string::npos)
      << result.output;
}

// MASTER_ADDR as users carry it over from URLs and LOCO_COORDINATOR (audit round 14): an IPv6 address in brackets
// trains; one with a port is refused at once, naming where the port goes; a link-local address binds Gloo to its
// interface (before: the brackets and the port waited for the whole timeout and blamed rank 0; the link-local
// address lost its interface, "Cannot resolve fe80::… to a (local) address").
TEST(RendezvousCli, MasterAddressesAsUrlsWriteThemAndLinkLocalOnesWork) {
  std::string loopback6, link_local;
  ifaddrs* all = nullptr;
  ASSERT_EQ(::getifaddrs(&all), 0);
  for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET6) continue;
    const auto* address = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
    char text[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET6, &address->sin6_addr, text, sizeof(text));
    if (std::string(text) == "::1") loopback6 = "[::1]";
    if (IN6_IS_ADDR_LINKLOCAL(&address->sin6_addr) && link_local.empty()) {
      link_local = std::string(text) + "%" + i->ifa_name;
    }
  }
  ::freeifaddrs(all);
  const int port = unused_port();
  RankEnvironment environment(0, 1, port);
  ::setenv("MASTER_ADDR", "127.0.0.1:29500", 1);
  auto result = run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "5", "--sizes", "1KiB"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("environment variable MASTER_ADDR '127.0.0.1:29500' holds a port (':29500'): give "
                               "the port in MASTER_PORT and the host alone ('127.0.0.1')"),
            std::string::npos)
      << result.output;
  for (const std::string& address : {loopback6, link_local}) {
    if (address.empty()) continue;  // no IPv6 here
    ::setenv("MASTER_ADDR", address.c_str(), 1);
    result =
        run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "10", "--sizes", "1KiB", "--repeats", "1"});
    EXPECT_EQ(result.exit_code, 0) << address << "\n" << result.output;
  }
}

// Note "rank-claim" (audit round 14): two processes that come to one store as the same rank (two runs given one
// MASTER_PORT, both left on the default): the second is refused at once, naming the first (before: both set rank
// 1's key, one trained in the other's run, exit 0, and the other waited in Gloo's handshake without a limit).
TEST(RendezvousCli, ASecondProcessForATakenRankIsRefused) {
  test::ScratchDir dir;
  const int port = unused_port();
  // A world of 3 whose rank 2 never comes: the run waits at the rendezvous, so both processes that come as rank 1
  // meet rank 0's store there, whichever is first.
  // Long enough for both to start on a loaded machine before rank 0 gives up waiting for rank 2.
  const std::vector<std::string> bench = small_gloo_bench(20);
  RankEnvironment environment(0, 3, port);
  const pid_t zero = test::start_loco(bench, dir / "zero.out", dir / "zero.err");
  ::setenv("RANK", "1", 1);
  std::vector<pid_t> ones;
  for (int i = 0; i < 2; ++i) {
    ones.push_back(test::start_loco(bench, dir / fmt::format("one-{}.out", i), dir / fmt::format("one-{}.err", i)));
  }
  int refused = 0;
  for (int i = 0; i < 2; ++i) {
    const int status = test::wait_exit(ones[static_cast<std::size_t>(i)], std::chrono::seconds(60));
    const std::string err = test::read_text(dir / fmt::format("one-{}.err", i));
    EXPECT_EQ(status, 1) << err;  // refused, or (the one that claimed rank 1) rank 2 never came
    if (err.find("rank 1 of the run at 127.0.0.1:" + std::to_string(port) +
                 " is taken already, by another process (") == std::string::npos) {
      continue;
    }
    ++refused;
    EXPECT_NE(err.find("two runs were given one MASTER_PORT"), std::string::npos) << err;
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(test::wait_exit(zero, std::chrono::seconds(60)), 1) << test::read_text(dir / "zero.err");
}

// The claim of a process that is gone (killed while the others waited, and its rank started again by hand) is
// taken over (audit round 14: refused as "taken already", while the others waited until the timeout). Rank 2
// never comes, so the run waits at the rendezvous throughout.
TEST(RendezvousCli, ARankStartedAgainAfterItsProcessDiedTakesItsPlace) {
  test::ScratchDir dir;
  const int port = unused_port();
  const std::vector<std::string> bench = small_gloo_bench(6);
  RankEnvironment environment(0, 3, port);
  const pid_t zero = test::start_loco(bench, dir / "zero.out", dir / "zero.err");
  ::setenv("RANK", "1", 1);
  const pid_t first = test::start_loco(bench, dir / "first.out", dir / "first.err");
  std::this_thread::sleep_for(std::chrono::seconds(2));  // connected, rank 1 claimed
  ::kill(first, SIGKILL);
  EXPECT_EQ(test::wait_exit(first, std::chrono::seconds(30)), 128 + SIGKILL);
  const pid_t again = test::start_loco(bench, dir / "again.out", dir / "again.err");
  EXPECT_EQ(test::wait_exit(again, std::chrono::seconds(60)), 1);  // rank 2 never came
  const std::string err = test::read_text(dir / "again.err");
  EXPECT_EQ(err.find("is taken already"), std::string::npos) << err;
  EXPECT_EQ(test::wait_exit(zero, std::chrono::seconds(60)), 1) << test::read_text(dir / "zero.err");
}

TEST(RendezvousCli, UnreachableMasterTimesOutWithinTheTimeout) {
  const int free_port = unused_port();
  RankEnvironment environment(1, 2, free_port);
  const auto start = Clock::now();
  const auto result = run_loco({"bench", "allreduce", "--backend", "gloo", "--timeout-s", "2", "--sizes", "1KiB"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("could not reach the rendezvous store at 127.0.0.1:" + std::to_string(free_port)),
            std::string::npos)
      << result.output;
  EXPECT_LT(seconds_since(start), 15.0);
}

}  // namespace
}  // namespace loco::test
