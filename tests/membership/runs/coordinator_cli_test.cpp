// `loco coordinator` as a user runs it: it prints where it listens, answers /status, and stops cleanly
// on SIGTERM; a taken port is a clear error.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
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
  const auto bad = test::run_loco({"coordinator", "--heartbeat-timeout-s", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--heartbeat-timeout-s"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace loco
