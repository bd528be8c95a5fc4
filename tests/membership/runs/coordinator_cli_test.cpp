// `loco coordinator` and `loco dashboard` as a user runs them: they print where they listen, answer /status,
// and stop cleanly on SIGTERM; a taken port or a missing directory is a clear error.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "loco/membership/authentication.h"
#include "support/child_process.h"
#include "support/test_support.h"

namespace loco {
namespace {

TEST(CoordinatorCli, ServesStatusAndStopsOnSigterm) {
  const std::string secret = test::use_test_run_secret();
  test::ChildProcess coordinator({LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0", "--run-id",
                                  "cli-run", "--min-replicas", "2"});
  const auto banner = coordinator.wait_for(std::regex("run cli-run on 127.0.0.1:([0-9]+).*store on port ([0-9]+)"), 30);
  ASSERT_TRUE(banner) << coordinator.output();
  httplib::Client client("127.0.0.1", std::stoi((*banner)[1]));
  const auto status = client.Get("/status");
  ASSERT_TRUE(status) << "no answer";
  const auto json = nlohmann::json::parse(status->body);
  EXPECT_EQ(json.at("run_id"), "cli-run");
  EXPECT_EQ(json.at("rules").at("min_replicas"), 2);
  const std::string nonce =
      nlohmann::json::parse(client.Post("/v1/challenge", "{}", "application/json")->body).at("nonce");
  const auto stamp = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  const nlohmann::json join = {{"run_id", "cli-run"}, {"name", "m"}, {"nonce", nonce}, {"timestamp", stamp},
                               {"mac", membership::join_mac(secret, "cli-run", "m", nonce, stamp)}};
  const auto joined = client.Post("/v1/join", join.dump(), "application/json");
  ASSERT_TRUE(joined);
  ASSERT_EQ(joined->status, 200) << joined->body;
  EXPECT_EQ(nlohmann::json::parse(joined->body).at("store_port"), std::stoi((*banner)[2]));
  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(10), 0) << coordinator.output();
}

// Without a secret the coordinator refuses to start, naming the ways to give one; --secret-file FILE writes a
// new secret to FILE (readable by its owner only) when FILE does not exist, and reads it when it does.
TEST(CoordinatorCli, ARunNeedsASecret) {
  ::unsetenv("LOCO_RUN_SECRET");
  ::unsetenv("LOCO_RUN_SECRET_FILE");
  const auto none = test::run_loco({"coordinator", "--host", "127.0.0.1", "--port", "0"});
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("needs the run's secret"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("--secret-file FILE"), std::string::npos) << none.output;
  test::ScratchDir dir;
  const std::string file = (dir / "run.secret").string();
  test::ChildProcess coordinator({LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0", "--secret-file", file});
  ASSERT_TRUE(coordinator.wait_for(std::regex("127.0.0.1:([0-9]+)"), 30)) << coordinator.output();
  EXPECT_NE(coordinator.output().find("wrote a new run secret to " + file), std::string::npos) << coordinator.output();
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(10), 0) << coordinator.output();
  std::filesystem::permissions(file, std::filesystem::perms::others_read, std::filesystem::perm_options::add);
  const auto exposed = test::run_loco({"coordinator", "--host", "127.0.0.1", "--port", "0", "--secret-file", file});
  EXPECT_EQ(exposed.exit_code, 2) << exposed.output;
  EXPECT_NE(exposed.output.find("chmod 600"), std::string::npos) << exposed.output;
  std::filesystem::create_directories(dir / "a_directory");
  std::filesystem::permissions(dir / "a_directory", std::filesystem::perms::owner_all);
  const auto directory = test::run_loco({"coordinator", "--host", "127.0.0.1", "--port", "0", "--secret-file",
                                         (dir / "a_directory").string()});
  EXPECT_EQ(directory.exit_code, 2) << directory.output;
  EXPECT_NE(directory.output.find("which is a directory, not a file"), std::string::npos) << directory.output;
  // A new secret is not written into a data directory or a checkpoint (before: it was, and the run went on).
  test::write_text(dir / "data" / "meta.json", "{}");
  test::write_text(dir / "data" / "tokenizer.json", "{}");
  const auto into_data = test::run_loco(
      {"coordinator", "--host", "127.0.0.1", "--port", "0", "--secret-file", (dir / "data" / "secret").string()});
  EXPECT_EQ(into_data.exit_code, 2) << into_data.output;
  EXPECT_NE(into_data.output.find("--secret-file's directory"), std::string::npos) << into_data.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "data" / "secret"));
}

// Under a ulimit -n too low for the store's connections the coordinator refuses to start, naming the limit
// (before: libtorch's store aborted the process, exit 134, "terminate called … Too many open files", as members
// connected); a soft limit below the hard one is raised first, so it starts.
TEST(CoordinatorCli, TooFewFileDescriptorsAreNamedBeforeTheStoreStarts) {
  test::use_test_run_secret();
  test::ChildProcess low(
      {"/usr/bin/prlimit", "--nofile=48:48", LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0"});
  EXPECT_EQ(low.wait(30), 1) << low.output();
  EXPECT_NE(low.output().find("the process may open 48 file descriptors (ulimit -n), too few to serve the run's store"),
            std::string::npos)
      << low.output();
  test::ChildProcess raised(
      {"/usr/bin/prlimit", "--nofile=48:4096", LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0"});
  ASSERT_TRUE(raised.wait_for(std::regex("127.0.0.1:([0-9]+)"), 30)) << raised.output();
  raised.signal(SIGTERM);
  EXPECT_EQ(raised.wait(10), 0) << raised.output();
}

TEST(CoordinatorCli, ATakenPortAndBadOptionsAreClearErrors) {
  test::use_test_run_secret();
  test::ChildProcess first({LOCO_BINARY, "coordinator", "--host", "127.0.0.1", "--port", "0"});
  const auto banner = first.wait_for(std::regex("127.0.0.1:([0-9]+)"), 30);
  ASSERT_TRUE(banner) << first.output();
  const std::string port = (*banner)[1];
  const auto taken = test::run_loco({"coordinator", "--host", "127.0.0.1", "--port", port});
  EXPECT_EQ(taken.exit_code, 1) << taken.output;
  EXPECT_NE(taken.output.find("cannot listen on 127.0.0.1:" + port), std::string::npos) << taken.output;
  // A coordinator that cannot start writes no new secret file (it was written before the port was tried).
  test::ScratchDir dir;
  const auto unwritten = dir / "run.secret";
  const auto taken_new_secret =
      test::run_loco({"coordinator", "--host", "127.0.0.1", "--port", port, "--secret-file", unwritten.string()});
  EXPECT_EQ(taken_new_secret.exit_code, 1) << taken_new_secret.output;
  EXPECT_FALSE(std::filesystem::exists(unwritten)) << taken_new_secret.output;
  const auto bad = test::run_loco({"coordinator", "--heartbeat-timeout-s", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--heartbeat-timeout-s"), std::string::npos) << bad.output;
  // One port for both: it was "cannot listen … (in use …)", the store having taken it first.
  const auto same = test::run_loco({"coordinator", "--host", "127.0.0.1", "--port", "29399", "--store-port", "29399"});
  EXPECT_EQ(same.exit_code, 2) << same.output;
  EXPECT_NE(same.output.find("--port and --store-port are both 29399"), std::string::npos) << same.output;
  test::ChildProcess fault({"/usr/bin/env", "LOCO_COORDINATOR_FAULT=abort:STOP", LOCO_BINARY, "coordinator", "--host",
                            "127.0.0.1", "--port", "0"});
  EXPECT_EQ(fault.wait(30), 2) << fault.output();
  EXPECT_NE(fault.output().find("LOCO_COORDINATOR_FAULT='abort:STOP': the one fault a coordinator takes is abort:KILL"),
            std::string::npos)
      << fault.output();
}

// loco dashboard on a run directory whose metrics.jsonl grows while it serves: /status lists it with its
// latest line, /history gives only what is new; it writes nothing into the directory and stops on SIGTERM.
TEST(DashboardCli, ServesARunDirectoryAsItGrowsAndStopsOnSigterm) {
  test::ScratchDir run;
  test::write_text(run / "metrics.jsonl", R"({"step": 10, "loss": 7.5, "elapsed_s": 1.0})" "\n");
  test::ChildProcess dashboard({LOCO_BINARY, "dashboard", run.path().string(), "--port", "0"});
  const auto banner = dashboard.wait_for(std::regex("at http://127.0.0.1:([0-9]+)/"), 30);
  ASSERT_TRUE(banner) << dashboard.output();
  httplib::Client client("127.0.0.1", std::stoi((*banner)[1]));
  const auto first = nlohmann::json::parse(client.Get("/history?after=0")->body);
  ASSERT_EQ(first.at("series").size(), 1u);
  EXPECT_EQ(first["series"][0]["loss"], nlohmann::json::parse("[7.5]"));
  std::ofstream(run / "metrics.jsonl", std::ios::app) << R"({"step": 20, "loss": 7.0, "elapsed_s": 2.0})" "\n";
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the files are read at most every 0.5 s
  const auto status = nlohmann::json::parse(client.Get("/status")->body);
  EXPECT_EQ(status.at("members").at(0).at("step"), 20);
  const auto later = nlohmann::json::parse(client.Get("/history?after=" + first.at("seq").dump())->body);
  ASSERT_EQ(later.at("series").size(), 1u);
  EXPECT_EQ(later["series"][0]["step"], nlohmann::json::parse("[20]"));
  EXPECT_EQ(client.Get("/history?after=x")->status, 400);
  EXPECT_NE(client.Get("/")->body.find("/dashboard.js"), std::string::npos);
  dashboard.signal(SIGTERM);
  EXPECT_EQ(dashboard.wait(10), 0) << dashboard.output();
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(run.path()), std::filesystem::directory_iterator()), 1);
}

// Directory names are bytes, not always UTF-8 (a Latin-1 name): the dashboard shows them with U+FFFD where a
// plain JSON dump refused them, and every /status and /history failed with HTTP 500 until it was restarted.
TEST(DashboardCli, ADirectoryNameThatIsNotUtf8IsShownNotFatal) {
  test::ScratchDir run;
  test::write_text(run / "metrics.jsonl", R"({"step": 10, "loss": 7.5, "elapsed_s": 1.0})" "\n");
  test::write_text(run / "members" / "bad\xff-1" / "metrics.jsonl", R"({"step": 5, "loss": 8.0, "elapsed_s": 1.0})" "\n");
  test::ChildProcess dashboard({LOCO_BINARY, "dashboard", run.path().string(), "--port", "0"});
  const auto banner = dashboard.wait_for(std::regex("at http://127.0.0.1:([0-9]+)/"), 30);
  ASSERT_TRUE(banner) << dashboard.output();
  httplib::Client client("127.0.0.1", std::stoi((*banner)[1]));
  const auto status = client.Get("/status");
  ASSERT_TRUE(status);
  ASSERT_EQ(status->status, 200) << status->body;
  const auto members = nlohmann::json::parse(status->body).at("members");
  ASSERT_EQ(members.size(), 2u);
  const std::string shown = (run / "members" / "bad\uFFFD-1").string();
  EXPECT_TRUE(std::any_of(members.begin(), members.end(), [&](const auto& m) { return m.at("name") == shown; }))
      << members.dump(2);
  const auto history = client.Get("/history?after=0");
  ASSERT_TRUE(history);
  EXPECT_EQ(history->status, 200) << history->body;
  EXPECT_EQ(nlohmann::json::parse(history->body).at("series").size(), 2u);
  dashboard.signal(SIGTERM);
  EXPECT_EQ(dashboard.wait(10), 0) << dashboard.output();
}

TEST(DashboardCli, AMissingDirectoryAndATakenPortAreClearErrors) {
  test::ScratchDir run;
  const auto missing = test::run_loco({"dashboard", (run / "nothing-here").string()});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("is not a directory: give loco dashboard run directories"), std::string::npos)
      << missing.output;
  test::ChildProcess first({LOCO_BINARY, "dashboard", run.path().string(), "--port", "0"});
  const auto banner = first.wait_for(std::regex("at http://127.0.0.1:([0-9]+)/"), 30);
  ASSERT_TRUE(banner) << first.output();
  const auto taken = test::run_loco({"dashboard", run.path().string(), "--port", (*banner)[1]});
  EXPECT_EQ(taken.exit_code, 1) << taken.output;
  EXPECT_NE(taken.output.find("cannot listen on 127.0.0.1:" + (*banner)[1]), std::string::npos) << taken.output;
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait(10), 0) << first.output();
}

}  // namespace
}  // namespace loco
