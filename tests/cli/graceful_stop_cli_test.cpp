// Note "graceful-stop" as a user meets it: `loco train` sent SIGTERM (a spot instance about to be taken away)
// or SIGINT (Ctrl-C) stops after a step where its replicas meet, writes a checkpoint of every replica there,
// says how to continue, and exits with 128 + the signal; resuming from that checkpoint trains what the
// uninterrupted run trains. A second signal ends the process at once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "support/test_support.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

using test::read_metrics;

// The step the run stopped after, from its summary line; -1 when there is none.
std::int64_t stopped_after(const std::string& output, const std::string& signal) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("stopped by " + signal + " after step (\\d+)"))) return -1;
  return std::stoll(m[1]);
}

class GracefulStopCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    test::prepare_tiny_byte_data(dir_->path());
    test::write_text(*dir_ / "empty.toml", "");
  }
  static void TearDownTestSuite() { delete dir_; }

  // `loco train` of a tiny model for 600 steps (a few seconds), a metrics line every step, no evaluation, no
  // checkpoint before the last step; `sets` are further --set assignments.
  static std::vector<std::string> train_args(const std::string& run, const std::vector<std::string>& sets) {
    std::vector<std::string> args = {"train", "--config", (*dir_ / "empty.toml").string()};
    for (const std::string& set : std::vector<std::string>{"model.hidden_size=32", "model.num_hidden_layers=2", "model.num_attention_heads=4",
          "data.dir=" + (*dir_ / "data").string(), "data.seq_len=16", "optim.lr=3e-3", "optim.warmup_steps=2",
          "train.batch_size=4", "train.steps=600", "train.eval_every=0", "train.eval_batches=1",
          "train.log_every=1", "train.threads=1", "train.out_dir=" + (*dir_ / run).string()}) {
      args.insert(args.end(), {"--set", set});
    }
    for (const auto& set : sets) args.insert(args.end(), {"--set", set});
    return args;
  }

  // Starts `args` (through `loco launch` with `launch`), sends `signal` once replica 0 logged 3 steps, and
  // returns the exit status.
  static int stop_after_three_steps(const std::string& run, const std::vector<std::string>& args, int signal) {
    const pid_t pid = test::start_loco(args, *dir_ / (run + ".out"), *dir_ / (run + ".err"));
    const bool started = test::eventually([&] { return read_metrics(*dir_ / run).size() >= 3; }, std::chrono::seconds(60));
    ::kill(pid, signal);
    const int status = test::wait_exit(pid, std::chrono::seconds(60));  // -1: still running then
    EXPECT_TRUE(started) << test::read_text(*dir_ / (run + ".err"));
    return status;
  }

  // Stops two replicas' run `args` with `signal` as stop_after_three_steps does and checks that it said so,
  // exited with 128 + the signal, and left both replicas' checkpoints of the step it names; that step (-1
  // when there is none).
  static std::int64_t stop_two_replicas(const std::string& run, const std::vector<std::string>& args, int signal,
                                        const std::string& name) {
    const int status = stop_after_three_steps(run, args, signal);
    const std::string said = output(run);
    EXPECT_EQ(status, 128 + signal) << said;
    const std::int64_t step = stopped_after(said, name);
    EXPECT_GE(step, 1) << said;
    EXPECT_LT(step, 600) << said;
    const std::string checkpoint = "step_" + std::to_string(step);
    EXPECT_TRUE(fs::exists(*dir_ / run / "checkpoints" / checkpoint / "state.json")) << said;
    EXPECT_TRUE(fs::exists(*dir_ / run / "replica_1" / "checkpoints" / checkpoint / "state.json")) << said;
    return step;
  }

  static std::string output(const std::string& run) {
    return test::read_text(*dir_ / (run + ".out")) + test::read_text(*dir_ / (run + ".err"));
  }

  // Resumes run `run` (trained with `sets`) from its checkpoint of `step` and checks that every loss from there
  // equals, within `tolerance` (relative), that of the same run trained without a stop.
  static void expect_resume_trains_as_uninterrupted(const std::string& run, const std::vector<std::string>& sets,
                                                    std::int64_t step, double tolerance);

  static ScratchDir* dir_;
};
ScratchDir* GracefulStopCli::dir_ = nullptr;

void expect_same_losses_from(const fs::path& resumed, const fs::path& uninterrupted, std::int64_t first_step,
                             double tolerance) {
  const auto a = read_metrics(resumed), b = read_metrics(uninterrupted);
  ASSERT_EQ(b.size(), 600u);
  ASSERT_EQ(a.size(), 600u) << "the resumed run's metrics.jsonl holds every step once";
  for (std::size_t i = static_cast<std::size_t>(first_step); i < b.size(); ++i) {
    const double la = a[i].at("loss"), lb = b[i].at("loss");
    EXPECT_NEAR(la, lb, tolerance * lb) << "step " << i + 1;
  }
}

void GracefulStopCli::expect_resume_trains_as_uninterrupted(const std::string& run,
                                                            const std::vector<std::string>& sets, std::int64_t step,
                                                            double tolerance) {
  const fs::path dir = *dir_ / run;
  const auto resumed =
      test::run_loco({"train", "--resume", (dir / "checkpoints" / ("step_" + std::to_string(step))).string()});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto uninterrupted = test::run_loco(train_args(run + "_uninterrupted", sets));
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.output;
  expect_same_losses_from(dir, *dir_ / (run + "_uninterrupted"), step, tolerance);
}

TEST_F(GracefulStopCli, SigtermStopsAReplicaWithACheckpointFromWhichTheRunContinuesExactly) {
  const int status = stop_after_three_steps("single", train_args("single", {}), SIGTERM);
  const std::string said = output("single");
  EXPECT_EQ(status, 128 + SIGTERM) << said;
  const std::int64_t step = stopped_after(said, "SIGTERM");
  ASSERT_GE(step, 3) << said;
  ASSERT_LT(step, 600) << said;
  const fs::path checkpoint = *dir_ / "single" / "checkpoints" / ("step_" + std::to_string(step));
  EXPECT_TRUE(fs::exists(checkpoint / "state.json")) << said;
  EXPECT_NE(said.find("loco train --resume " + checkpoint.string()), std::string::npos) << said;
  EXPECT_EQ(read_metrics(*dir_ / "single").back().at("step"), step) << "the last step is logged";

  expect_resume_trains_as_uninterrupted("single", {}, step, 0.0);  // exact
}

// Replicas as threads reach a signal's agreement at a DiLoCo synchronisation (every 4 steps): both stop
// after the same step, and each wrote its checkpoint there.
TEST_F(GracefulStopCli, ReplicasAsThreadsStopTogetherAtASynchronisation) {
  const std::vector<std::string> diloco{"dist.algorithm=diloco", "dist.replicas=2", "diloco.sync_every=4",
                                        "train.stop_check_every=0"};
  const std::int64_t step = stop_two_replicas("threads", train_args("threads", diloco), SIGINT, "SIGINT");
  ASSERT_GE(step, 4) << output("threads");
  EXPECT_EQ(step % 4, 0) << output("threads");

  expect_resume_trains_as_uninterrupted("threads", diloco, step, 1e-5);
}

// Between synchronisations far apart (H = 1000), the replicas also check every train.stop_check_every (8)
// steps: they stop together inside the round, and the run resumed from there trains what the uninterrupted
// run does.
TEST_F(GracefulStopCli, ReplicasStopInsideALongRoundAtTheirNextCheck) {
  const std::vector<std::string> diloco{"dist.algorithm=diloco", "dist.replicas=2", "diloco.sync_every=1000",
                                        "train.stop_check_every=8"};
  const std::int64_t step = stop_two_replicas("round", train_args("round", diloco), SIGTERM, "SIGTERM");
  ASSERT_GE(step, 8) << output("round");
  EXPECT_EQ(step % 8, 0) << output("round");

  expect_resume_trains_as_uninterrupted("round", diloco, step, 1e-5);
}

// Streaming DiLoCo with its exchange overlapped (τ = 1): the replicas agree after the step where the exchange
// begun at a synchronisation (every 4 steps) lands, with nothing left in flight on their group.
TEST_F(GracefulStopCli, OverlappedExchangesLandBeforeTheReplicasStop) {
  const std::vector<std::string> streaming{"dist.algorithm=streaming", "dist.replicas=2", "streaming.fragments=1",
                                           "streaming.sync_every=4", "streaming.overlap=1"};
  const std::int64_t step = stop_two_replicas("overlapped", train_args("overlapped", streaming), SIGTERM, "SIGTERM");
  EXPECT_GE(step, 5) << output("overlapped");
  EXPECT_EQ(step % 4, 1) << output("overlapped");
}

// Streaming DiLoCo whose exchanges are always in flight (τ = 3, fragments synchronising every 2 steps): the
// replicas wait for the exchanges in flight at a check (every 8 steps) and stop there, and the run resumed from
// that checkpoint, exchanges in flight included, trains what the uninterrupted run does. Before, a signal said
// the run would stop and it trained to its end (`loco launch` killed such ranks without a checkpoint).
TEST_F(GracefulStopCli, ReplicasWithExchangesAlwaysInFlightStopAtTheirNextCheck) {
  const std::vector<std::string> streaming{"dist.algorithm=streaming", "dist.replicas=2",
                                           "streaming.fragments=2",    "streaming.sync_every=4",
                                           "streaming.overlap=3",      "train.stop_check_every=8"};
  const std::int64_t step = stop_two_replicas("always", train_args("always", streaming), SIGTERM, "SIGTERM");
  ASSERT_GE(step, 8) << output("always");
  EXPECT_EQ(step % 8, 0) << output("always");

  expect_resume_trains_as_uninterrupted("always", streaming, step, 1e-5);
}

// Ranks started by `loco launch`: the launcher passes the signal on to each, and they agree over their group on
// the synchronisation to stop after. SIGHUP (the terminal or ssh session that started the run went away) stops
// them as SIGTERM does (before: it killed every rank at once, without a checkpoint).
TEST_F(GracefulStopCli, LaunchedRanksStopTogetherAtASynchronisation) {
  std::vector<std::string> args{"launch", "--nproc", "2", "--master-port", "0", "--", LOCO_BINARY};
  const auto train = train_args("ranks", {"dist.algorithm=diloco", "dist.backend=gloo", "diloco.sync_every=4",
                                          "train.stop_check_every=0"});
  args.insert(args.end(), train.begin(), train.end());
  const std::int64_t step = stop_two_replicas("ranks", args, SIGHUP, "SIGHUP");
  // The command to continue is the launch's (a rank started alone refuses it without RANK and WORLD_SIZE).
  EXPECT_NE(output("ranks").find("continue the run with: loco launch --nproc 2 -- train --resume "), std::string::npos)
      << output("ranks");
  EXPECT_GE(step, 4) << output("ranks");
  EXPECT_EQ(step % 4, 0) << output("ranks");
  EXPECT_EQ(read_metrics(*dir_ / "ranks" / "replica_1").back().at("step"), step) << output("ranks");
}

// `loco train 2>&1 | tee log` whose ssh session closed: tee is gone when SIGHUP comes, and the output has no reader
// (before: SIGPIPE killed the run at its first word about the stop, without a checkpoint); and output to a full
// disk (before: SIGABRT, a failed write in main's error handler). Both stop with their checkpoint, exit 129.
TEST_F(GracefulStopCli, AStopWhoseOutputCannotBeWrittenStillKeepsItsCheckpoint) {
  const fs::path fifo = *dir_ / "output.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  for (const auto& [run, out] :
       std::vector<std::pair<std::string, fs::path>>{{"no-reader", fifo}, {"full", "/dev/full"}}) {
    const pid_t pid = test::start_loco(train_args(run, {}), out, out);
    const bool started =
        test::eventually([&] { return read_metrics(*dir_ / run).size() >= 3; }, std::chrono::seconds(60));
    if (run == "no-reader") ::close(reader);  // the output's reader goes first, as tee does
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(pid, SIGHUP);
    const int status = test::wait_exit(pid, std::chrono::seconds(60));
    EXPECT_TRUE(started) << run;
    EXPECT_EQ(status, 128 + SIGHUP) << run;
    const std::int64_t last = read_metrics(*dir_ / run).back().at("step");
    EXPECT_TRUE(fs::exists(*dir_ / run / "checkpoints" / ("step_" + std::to_string(last)) / "state.json")) << run;
  }
}

// A rank that waits for its run's other ranks to come (rank 0 for rank 1, rank 1 for rank 0's store) stops at
// once, having trained and written nothing (before: it went on waiting until comm.timeout_s, then failed).
TEST_F(GracefulStopCli, ARankWaitingForTheOthersToComeStopsAtOnce) {
  const test::ListeningSocket probe;
  const std::string port = std::to_string(probe.port() + 1);  // nobody listens there
  for (const std::string rank : {"0", "1"}) {
    const std::string run = "alone-" + rank;
    for (const auto& [name, value] : std::vector<std::pair<const char*, std::string>>{
             {"RANK", rank}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}}) {
      ::setenv(name, value.c_str(), 1);
    }
    const pid_t pid =
        test::start_loco(train_args(run, {"dist.algorithm=diloco", "dist.backend=gloo", "comm.timeout_s=120"}),
                         *dir_ / (run + ".out"), *dir_ / (run + ".err"));
    for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(name);
    // Rank 0 says its config before it meets the others; rank 1 says nothing until then.
    if (rank == "0") {
      EXPECT_TRUE(test::eventually([&] { return output(run).find("resolved config") != std::string::npos; },
                                   std::chrono::seconds(60)));
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));  // into the rendezvous
    const auto signalled = std::chrono::steady_clock::now();
    ::kill(pid, SIGTERM);
    EXPECT_EQ(test::wait_exit(pid, std::chrono::seconds(30)), 128 + SIGTERM) << output(run);
    EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(15)) << output(run);
    EXPECT_TRUE(std::regex_search(output(run), std::regex("stopped by SIGTERM while rank " + rank +
                                                          " of 2 waited to (meet the others at the rendezvous|"
                                                          "reach the rendezvous store)")))
        << output(run);
    EXPECT_FALSE(fs::exists(*dir_ / run / "checkpoints")) << output(run);
  }
}

// A rank whose peer dies (kill -9) fails, saying where the run starts again (before: only the collective's error).
TEST_F(GracefulStopCli, ARankWhosePeerDiesSaysWhereTheRunStartsAgain) {
  const test::ListeningSocket probe;
  const std::string port = std::to_string(probe.port() + 2);
  const std::string run = "peer-dies";
  std::vector<pid_t> ranks;
  for (const std::string rank : {"0", "1"}) {
    for (const auto& [name, value] :
         std::vector<std::pair<const char*, std::string>>{{"RANK", rank},
                                                          {"WORLD_SIZE", "2"},
                                                          {"MASTER_ADDR", "127.0.0.1"},
                                                          {"MASTER_PORT", port},
                                                          {"LOCO_FAULT", rank == "1" ? "6:KILL" : ""}}) {
      ::setenv(name, value.c_str(), 1);
    }
    const std::string files = rank == "0" ? run : run + "-rank1";
    ranks.push_back(
        test::start_loco(train_args(run, {"dist.algorithm=diloco", "diloco.sync_every=2", "dist.backend=gloo",
                                          "train.checkpoint_every=4", "comm.timeout_s=60"}),
                         *dir_ / (files + ".out"), *dir_ / (files + ".err")));
  }
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCO_FAULT"}) ::unsetenv(name);
  EXPECT_EQ(test::wait_exit(ranks[1], std::chrono::seconds(60)), 128 + SIGKILL);
  EXPECT_EQ(test::wait_exit(ranks[0], std::chrono::seconds(60)), 1) << output(run);
  const std::string checkpoint = (*dir_ / run / "checkpoints" / "step_4").string();
  EXPECT_NE(output(run).find("The run stopped; resume from the last checkpoint, " + checkpoint), std::string::npos)
      << output(run);
}

// The first signal waits for the next synchronisation (here far away); a second one ends the process at once,
// as the signal does by default.
TEST_F(GracefulStopCli, ASecondSignalStopsAtOnce) {
  const pid_t pid = test::start_loco(
      train_args("twice", {"dist.algorithm=diloco", "dist.replicas=2", "diloco.sync_every=100000",
                           "train.steps=100000", "train.stop_check_every=0"}),
      *dir_ / "twice.out", *dir_ / "twice.err");
  ASSERT_TRUE(test::eventually([&] { return read_metrics(*dir_ / "twice").size() >= 2; }, std::chrono::seconds(60)));
  ::kill(pid, SIGINT);
  ASSERT_TRUE(test::eventually(
      [&] { return test::read_text(*dir_ / "twice.err").find("SIGINT received") != std::string::npos; },
      std::chrono::seconds(10)));
  ::kill(pid, SIGINT);
  EXPECT_EQ(test::wait_exit(pid, std::chrono::seconds(60)), 128 + SIGINT) << output("twice");
  EXPECT_EQ(stopped_after(output("twice"), "SIGINT"), -1) << "killed by the signal, not stopped after a step";
  EXPECT_FALSE(fs::exists(*dir_ / "twice" / "checkpoints")) << output("twice");
}

}  // namespace
}  // namespace loco
