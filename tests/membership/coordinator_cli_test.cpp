// `loco coordinator` as a user runs it: it prints where it listens, answers /status, and stops cleanly
// on SIGTERM; a taken port is a clear error.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "support/child_process.h"
#include "support/test_support.h"

namespace loco {
namespace {

TEST(CoordinatorCli, ServesStatusAndStopsOnSigterm) {
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
  const auto joined = client.Post("/v1/join", R"({"run_id": "cli-run", "name": "m"})", "application/json");
  ASSERT_TRUE(joined);
  EXPECT_EQ(nlohmann::json::parse(joined->body).at("store_port"), std::stoi((*banner)[2]));
  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(10), 0) << coordinator.output();
}

TEST(CoordinatorCli, ATakenPortAndBadOptionsAreClearErrors) {
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
