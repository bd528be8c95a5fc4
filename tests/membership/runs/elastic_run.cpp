// The elastic runs' fixture (elastic_run.h): starting coordinators, members and launchers, and reading
// back what they wrote.
#include "membership/runs/elastic_run.h"

#include <cstdint>
#include <fstream>
#include <regex>

namespace loco {

namespace fs = std::filesystem;

test::ScratchDir* ElasticTrain::dir_ = nullptr;
std::string ElasticTrain::secret_;

void ElasticTrain::SetUpTestSuite() {
  secret_ = test::use_test_run_secret();
  dir_ = new test::ScratchDir();
  test::prepare_tiny_byte_data(dir_->path());
}

void ElasticTrain::TearDownTestSuite() { delete dir_; }

std::unique_ptr<test::ChildProcess> ElasticTrain::coordinator(const std::string& run, int start_replicas, int port,
                                                              int store_port, int min_replicas,
                                                              const std::string& fault,
                                                              const std::string& heartbeat_timeout_s) {
  auto c = std::make_unique<test::ChildProcess>(std::vector<std::string>{"/usr/bin/env",
                                                                         "LOCO_COORDINATOR_FAULT=" + fault,
                                                                         LOCO_BINARY,
                                                                         "coordinator",
                                                                         "--host",
                                                                         "127.0.0.1",
                                                                         "--port",
                                                                         std::to_string(port),
                                                                         "--store-port",
                                                                         std::to_string(store_port),
                                                                         "--run-id",
                                                                         run,
                                                                         "--min-replicas",
                                                                         std::to_string(min_replicas),
                                                                         "--start-replicas",
                                                                         std::to_string(start_replicas),
                                                                         "--heartbeat-timeout-s",
                                                                         heartbeat_timeout_s,
                                                                         "--join-window-s",
                                                                         "0.5"});
  const auto banner = c->wait_for(std::regex("127.0.0.1:([0-9]+) .*store on port ([0-9]+)"), 30);
  EXPECT_TRUE(banner) << c->output();
  address_ = banner ? "127.0.0.1:" + (*banner)[1] : "";
  store_port_ = banner ? std::stoi((*banner)[2]) : 0;
  return c;
}

std::unique_ptr<test::ChildProcess> ElasticTrain::member(const std::string& run, const std::string& name, int steps,
                                                         const std::string& fault,
                                                         const std::vector<std::string>& settings,
                                                         const std::vector<std::string>& arguments) {
  std::vector<std::string> args = {"/usr/bin/env", "LOCO_COORDINATOR=" + address_, "LOCO_RUN_ID=" + run,
                                   "LOCO_MEMBER_NAME=" + name};
  if (!fault.empty()) args.push_back("LOCO_FAULT=" + fault);
  for (const std::string& a :
       {std::string(LOCO_BINARY), std::string("train"), std::string("--config"), config().string(),
        std::string("--set"), "train.out_dir=" + (*dir_ / run).string(), std::string("--set"),
        "train.steps=" + std::to_string(steps), std::string("--set"), std::string("comm.timeout_s=60")}) {
    args.push_back(a);
  }
  for (const std::string& setting : settings) {
    args.push_back("--set");
    args.push_back(setting);
  }
  args.insert(args.end(), arguments.begin(), arguments.end());
  return std::make_unique<test::ChildProcess>(args);
}

fs::path ElasticTrain::config() {
  const fs::path path = *dir_ / "elastic.toml";
  test::write_text(path,
                   "[model]\nhidden_size = 32\nnum_hidden_layers = 2\nnum_attention_heads = 4\n"
                   "[data]\ndir = \"" +
                       (*dir_ / "data").string() +
                       "\"\nseq_len = 16\n"
                       "[optim]\nlr = 3e-3\nwarmup_steps = 2\n"
                       "[train]\nbatch_size = 2\neval_every = 0\neval_batches = 1\nlog_every = 4\nthreads = 1\n"
                       "[dist]\nalgorithm = \"diloco\"\nbackend = \"gloo\"\nbatch = \"per_replica\"\n"
                       "elastic = true\nreplicas = 3\n"
                       "[diloco]\nsync_every = 4\n");
  return path;
}

std::string ElasticTrain::launched(const std::string& run, int nproc, int max_restarts, const std::string& fault,
                                   int steps, const std::vector<std::string>& settings,
                                   const std::vector<std::string>& arguments) {
  std::vector<std::string> args = {"/usr/bin/env",
                                   "LOCO_FAULT=" + fault,
                                   LOCO_BINARY,
                                   "launch",
                                   "--elastic",
                                   "--nproc",
                                   std::to_string(nproc),
                                   "--max-restarts",
                                   std::to_string(max_restarts),
                                   "--heartbeat-timeout-s",
                                   "1",
                                   "--join-window-s",
                                   "0.5",
                                   "--",
                                   "train",
                                   "--config",
                                   config().string(),
                                   "--set",
                                   "train.out_dir=" + (*dir_ / run).string(),
                                   "--set",
                                   "train.steps=" + std::to_string(steps),
                                   "--set",
                                   "comm.timeout_s=60"};
  for (const std::string& setting : settings) {
    args.push_back("--set");
    args.push_back(setting);
  }
  args.insert(args.end(), arguments.begin(), arguments.end());
  test::ChildProcess launch(args);
  EXPECT_EQ(launch.wait(300), 0) << launch.output();
  return launch.output();
}

std::string ElasticTrain::final_file(const std::string& run, const std::string& member_dir, int steps,
                                     const std::string& name) {
  return test::read_text(*dir_ / run / "members" / member_dir / "checkpoints" / ("step_" + std::to_string(steps)) /
                         name);
}

std::string ElasticTrain::final_global(const std::string& run, const std::string& member_dir, int steps,
                                       const std::string& tensor) {
  if (tensor.empty()) return final_file(run, member_dir, steps, "model.safetensors");
  const std::string bytes = final_file(run, member_dir, steps, "strategy.safetensors");
  if (bytes.size() < 8) return "";
  std::uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i)
    header_length |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_length));
  const auto offsets = header.at(tensor).at("data_offsets");
  const std::size_t begin = 8 + header_length + offsets[0].get<std::size_t>();
  return bytes.substr(begin, offsets[1].get<std::size_t>() - offsets[0].get<std::size_t>());
}

std::vector<nlohmann::json> ElasticTrain::events(const std::string& run, const std::string& member_dir,
                                                 const std::string& kind, nlohmann::json* last_line) {
  std::ifstream in(*dir_ / run / "members" / member_dir / "metrics.jsonl");
  std::vector<nlohmann::json> found;
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line);
    if (last_line) *last_line = record;
    for (const auto& e : record.value("membership_events", nlohmann::json::array())) {
      if (e.at("kind") == kind) found.push_back(e);
    }
  }
  return found;
}

}  // namespace loco
