// The fixture of the elastic runs (`loco train` with dist.elastic = true, as a user runs it;
// docs/fault-tolerance.md "Elastic DiLoCo"): a coordinator and member processes on a tiny byte-level
// corpus, and what the tests read back (metrics events, final checkpoints). The tests are grouped by what
// they do to a run: members that fail, join and heal (elastic_train_test.cpp); stops, give-ups, resumes and
// coordinator restarts (elastic_stop_resume_test.cpp); simulated churn, Streaming and robust aggregation
// (elastic_churn_test.cpp); pipeline replicas (elastic_pipelines_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/child_process.h"
#include "support/test_support.h"

namespace loco {

class ElasticTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  // The coordinator of a run; its address in `address_`, its store's port in `store_port_`. Ports 0: free
  // ones (a replacement coordinator takes its predecessor's). `fault`: its LOCO_COORDINATOR_FAULT.
  std::unique_ptr<test::ChildProcess> coordinator(const std::string& run, int start_replicas, int port = 0,
                                                  int store_port = 0, int min_replicas = 2,
                                                  const std::string& fault = "",
                                                  const std::string& heartbeat_timeout_s = "1");

  // A member process of run `run` named `name`, with `fault` as LOCO_FAULT ("" for none), `settings` as
  // --set overrides and `arguments` after them. A member that waits for a quorum that never comes gives up
  // after comm.timeout_s (60 s).
  std::unique_ptr<test::ChildProcess> member(const std::string& run, const std::string& name, int steps,
                                             const std::string& fault = "",
                                             const std::vector<std::string>& settings = {},
                                             const std::vector<std::string>& arguments = {});

  // The run's config: three DiLoCo members (H = 4) of a 2-layer model over Gloo.
  std::filesystem::path config();

  // `loco launch --elastic` of `nproc` ranks (LOCO_FAULT `fault`, restarts up to `max_restarts`) training run
  // `run` for `steps` steps with `settings` as further --set overrides and `arguments` after them; its output,
  // once it exited 0.
  std::string launched(const std::string& run, int nproc, int max_restarts, const std::string& fault, int steps,
                       const std::vector<std::string>& settings = {}, const std::vector<std::string>& arguments = {});

  // The bytes of a file of a member's final checkpoint.
  std::string final_file(const std::string& run, const std::string& member_dir, int steps, const std::string& name);

  // The bytes of the global parameters a member ended with (its final checkpoint's strategy state; the
  // safetensors layout read by hand: this test binary has no libtorch). Data parallel members (`tensor`
  // empty): their whole model file.
  std::string final_global(const std::string& run, const std::string& member_dir, int steps,
                           const std::string& tensor = "outer/global");

  // The membership events of kind `kind` in a member's metrics.jsonl, and the last line's fields.
  std::vector<nlohmann::json> events(const std::string& run, const std::string& member_dir, const std::string& kind,
                                     nlohmann::json* last_line = nullptr);

  // How a test checks an algorithm's members: `settings` choose it; the last metrics line's `counter` counts
  // the committed synchronisations; `tensors` name the global parameters in a checkpoint ("" for the whole
  // model, data parallel).
  // NoLoCo's replicas differ by design: `tensors` empty, nothing compared.
  struct Checks {
    std::vector<std::string> settings;
    std::string counter = "outer_steps";
    std::vector<std::string> tensors = {"outer/global"};
  };
  static Checks data_parallel() { return {{"dist.algorithm=ddp"}, "commits", {""}}; }
  static Checks noloco() { return {{"dist.algorithm=noloco", "noloco.sync_every=4"}, "outer_steps", {}}; }

  // Scenarios that several tests play with other algorithms; each is defined beside its tests.
  void survivors_finish(const std::string& run, const std::string& fault, const Checks& checks, int synchronisations,
                        int steps = 24);
  void simulated_churn(const std::string& run, const Checks& checks, int synchronisations);
  void resumes_from_members_checkpoints(const std::string& run, const std::vector<std::string>& settings);
  void stops_while_waiting(const std::string& run, const Checks& checks, int stopped_after, int synchronisations);
  void removes_a_replica_sending_nan(const std::string& run, const std::vector<std::string>& settings,
                                     const std::string& refusal);

  static constexpr int kLateJoinSteps = 400;  // long enough that the late member arrives before the others finish
  struct LateJoin {
    std::unique_ptr<test::ChildProcess> coordinator, a, b, c;
  };
  LateJoin late_member_joins(const std::string& run, const std::string& a_fault);

  static test::ScratchDir* dir_;
  static std::string secret_;
  std::string address_;
  int store_port_ = 0;
};

}  // namespace loco
