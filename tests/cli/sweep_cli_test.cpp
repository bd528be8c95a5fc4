// loco sweep as a user runs it: a small grid trained, evaluated and tabulated; run again, it redoes only
// what has no result; a run that fails is named with its log and the sweep exits non-zero.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "loco/util/directory_lock.h"
#include "support/test_support.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::run_loco;
using test::run_loco_within;
using test::ScratchDir;
using test::write_text;

class SweepCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    test::prepare_tiny_byte_data(dir_->path());
    write_text(*dir_ / "base.toml", test::tiny_model_toml((*dir_ / "data").string()) + R"([optim]
lr = 3e-3
warmup_steps = 2
[train]
steps = 8
batch_size = 4
eval_every = 0
eval_batches = 2
log_every = 4
)");
  }
  static void TearDownTestSuite() { delete dir_; }

  // A sweep file named `name` with the given [axes] lines; its runs go to DIR/name.
  static fs::path sweep(const std::string& name, const std::string& axes) {
    const fs::path file = *dir_ / (name + ".toml");
    write_text(file, fmt::format("base = \"base.toml\"\nout_dir = \"{}\"\njobs = 2\n[eval]\nbatches = 2\n"
                                 "[set]\n\"dist.replicas\" = 2\n\"dist.algorithm\" = \"diloco\"\n[axes]\n{}\n",
                                 (*dir_ / name).string(), axes));
    return file;
  }

  static std::vector<std::string> lines_of(const fs::path& file) {
    std::istringstream in(test::read_text(file));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  static ScratchDir* dir_;
};
ScratchDir* SweepCli::dir_ = nullptr;

TEST_F(SweepCli, TrainsEvaluatesAndTabulatesTheGridThenSkipsWhatIsDone) {
  const fs::path file = sweep("grid", "\"dist.algorithm\" = [\"ddp\", \"diloco\"]\n\"optim.lr\" = [1e-3, 3e-3]");
  auto r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 run(s)"), std::string::npos) << r.output;
  const auto csv = lines_of(*dir_ / "grid" / "summary.csv");
  ASSERT_EQ(csv.size(), 5u) << r.output;
  EXPECT_EQ(csv[0].rfind("name,dist.algorithm,optim.lr,cell,loss,params,non_embedding_params,replicas,algorithm,", 0), 0u)
      << csv[0];
  EXPECT_EQ(csv[1].rfind("algorithm-ddp_lr-0.001,ddp,0.001,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[4].rfind("algorithm-diloco_lr-0.003,diloco,0.003,", 0), 0u) << csv[4];
  const auto jsonl = lines_of(*dir_ / "grid" / "summary.jsonl");
  ASSERT_EQ(jsonl.size(), 4u);
  for (const auto& line : jsonl) {
    const auto result = nlohmann::json::parse(line);
    EXPECT_GT(result.at("loss").get<double>(), 0) << line;
    EXPECT_EQ(result.at("replicas"), 2) << line;
    EXPECT_EQ(result.at("steps"), 8) << line;
    EXPECT_GT(result.at("eval_tokens").get<double>(), 0) << line;
  }
  // The evaluation's own output is kept whole under its name, written beside first (a sweep stopped during an
  // evaluation left a final_eval.json of 0 bytes).
  const fs::path run = *dir_ / "grid" / "algorithm-ddp_lr-0.001";
  EXPECT_EQ(nlohmann::json::parse(test::read_text(run / "final_eval.json")).at("loss"),
            nlohmann::json::parse(jsonl[0]).at("loss"));
  EXPECT_FALSE(fs::exists(run / "final_eval.json.partial"));
  // The runs differ: another learning rate, another loss.
  EXPECT_NE(nlohmann::json::parse(jsonl[0]).at("loss"), nlohmann::json::parse(jsonl[1]).at("loss"));
  // loco fit reads the table (one model size: it says what is missing rather than failing to read it).
  const auto fit = run_loco({"fit", (*dir_ / "grid" / "summary.csv").string()});
  EXPECT_NE(fit.output.find("1 point for 2 parameters"), std::string::npos) << fit.output;

  // Again: nothing is trained; a run whose result is removed is redone alone.
  fs::remove(*dir_ / "grid" / "algorithm-diloco_lr-0.001" / "sweep_result.json");
  r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("algorithm-ddp_lr-0.001: done before, skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("algorithm-diloco_lr-0.001: loss "), std::string::npos) << r.output;
  EXPECT_EQ(lines_of(*dir_ / "grid" / "summary.csv").size(), 5u);

  // A run whose config changed since its result is trained again (before: the old result was kept, and listed
  // as the new config's).
  std::string changed = test::read_text(file);
  changed.replace(changed.find("[set]\n"), 6, "[set]\n\"train.seed\" = 7\n");
  write_text(file, changed);
  r = run_loco({"sweep", file.string(), "--tables-only"});  // the old results are not this config's
  EXPECT_NE(r.output.find("algorithm-ddp_lr-0.001: not listed: its result was made with another config (train.seed "
                          "was 0, is 7)"),
            std::string::npos)
      << r.output;
  r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("algorithm-ddp_lr-0.001: its config changed since its result (train.seed was 0, is 7): "
                          "trained again"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("done before, skipped"), std::string::npos) << r.output;
  // So is one scored by another [eval] (before: kept, and listed beside runs scored on other tokens).
  changed.replace(changed.find("batches = 2"), 11, "batches = 3");
  write_text(file, changed);
  r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("algorithm-ddp_lr-0.001: its config changed since its result (eval.batches was 2, is 3)"),
            std::string::npos)
      << r.output;
}

TEST_F(SweepCli, TheBestRunOfEachCellIsRepeatedAndTheCellsAreTabulated) {
  const fs::path file = sweep("best", "\"optim.lr\" = [1e-3, 3e-3]\n[best]\ntuned = [\"optim.lr\"]\n"
                                      "[best.repeat]\n\"train.seed\" = [1]");
  auto r = run_loco({"sweep", file.string(), "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("then the best run of each of the 1 cells over optim.lr again, 1 time(s) each (1 runs)"),
            std::string::npos)
      << r.output;
  r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = lines_of(*dir_ / "best" / "summary.jsonl");
  ASSERT_EQ(summary.size(), 3u) << r.output;
  // The repeat follows the run it repeats (the better of the two) and differs from it only in its seed.
  const auto first = nlohmann::json::parse(summary[0]);
  const bool first_is_best = nlohmann::json::parse(summary[1]).contains("repeat_of");
  const auto best = first_is_best ? first : nlohmann::json::parse(summary[1]);
  const auto second = nlohmann::json::parse(summary[first_is_best ? 1 : 2]);
  const auto other = nlohmann::json::parse(summary[first_is_best ? 2 : 0]);
  EXPECT_LE(best.at("loss").get<double>(), other.at("loss").get<double>());
  EXPECT_EQ(second.at("repeat_of"), best.at("name")) << r.output;
  EXPECT_EQ(second.at("axes").at("train.seed"), "1");
  EXPECT_EQ(second.at("lr"), best.at("lr"));
  EXPECT_NE(second.at("loss"), best.at("loss"));  // another seed, another loss
  const auto cells = lines_of(*dir_ / "best" / "cells.jsonl");
  ASSERT_EQ(cells.size(), 1u);
  const auto cell = nlohmann::json::parse(cells[0]);
  EXPECT_EQ(cell.at("best_run"), best.at("name"));
  EXPECT_EQ(cell.at("seeds"), 2);
  EXPECT_NEAR(cell.at("loss").get<double>(), (best.at("loss").get<double>() + second.at("loss").get<double>()) / 2,
              1e-12);
  EXPECT_EQ(lines_of(*dir_ / "best" / "cells.csv").size(), 2u);
  // Again: the grid runs and the repeat are all done before.
  r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[repeat 1/1] " + second.at("name").get<std::string>() + ": done before, skipped"),
            std::string::npos)
      << r.output;
}

TEST_F(SweepCli, AFailedRunIsNamedWithItsLogAndTheOthersStillFinish) {
  const fs::path file =
      sweep("failing", fmt::format("\"data.dir\" = [\"{}\", \"{}\"]", (*dir_ / "data").string(),
                                   (*dir_ / "no-such-data").string()));
  const auto r = run_loco({"sweep", file.string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAILED: loco train exited with 1 (log: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 run(s) failed"), std::string::npos) << r.output;
  EXPECT_EQ(lines_of(*dir_ / "failing" / "summary.csv").size(), 2u);  // the header and the run that finished
}

// Audit round 14: a run directory the sweep did not start (a `loco train` the user ran there: no log of the
// sweep's beside it) is left alone and named (before: removed, checkpoints and all, and trained over, exit 0).
TEST_F(SweepCli, ARunDirectoryTheSweepDidNotStartIsLeftAlone) {
  const fs::path file = sweep("foreign", "\"optim.lr\" = [0.003]");
  const fs::path theirs = *dir_ / "foreign" / "lr-0.003";
  fs::create_directories(theirs / "checkpoints" / "step_2");
  write_text(theirs / "metrics.jsonl", "{\"step\": 2}\n");
  const auto r = run_loco({"sweep", file.string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("lr-0.003 FAILED: its directory " + theirs.string() +
                          " holds files this sweep did not write (no log " +
                          (*dir_ / "foreign" / "lr-0.003.log").string() + "): a run of its own? Move it away"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(test::read_text(theirs / "metrics.jsonl"), "{\"step\": 2}\n");
  EXPECT_TRUE(fs::is_directory(theirs / "checkpoints" / "step_2"));
}

// Audit round 12: a second sweep of one directory while the first runs is refused at once (before: it removed the
// first's runs as they trained and mixed the tables), and a run directory that a live train holds (its sweep
// killed) is not removed under it. The test holds the locks the other processes would.
TEST_F(SweepCli, ASweepOfADirectoryInUseIsRefused) {
  const fs::path file = sweep("busy", "\"optim.lr\" = [0.003, 0.001]");
  fs::create_directories(*dir_ / "busy");
  {
    const DirectoryLock other_sweep(*dir_ / "busy", "test");
    const auto refused = run_loco({"sweep", file.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("sweep output directory '" + (*dir_ / "busy").string() +
                                  "' is being written by another loco process right now"),
              std::string::npos)
        << refused.output;
    EXPECT_EQ(fs::directory_iterator(*dir_ / "busy"), fs::directory_iterator()) << "it wrote into the directory";
  }
  const fs::path live_run = *dir_ / "busy" / "lr-0.003";
  fs::create_directories(live_run);
  write_text(live_run / "metrics.jsonl", "{\"step\": 1}\n");
  {
    const DirectoryLock live_train(live_run, "test");
    const auto r = run_loco({"sweep", file.string()});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("lr-0.003 FAILED: run directory '" + live_run.string() +
                            "' is being written by another loco process right now"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(test::read_text(live_run / "metrics.jsonl"), "{\"step\": 1}\n") << "the live run's files were touched";
  }
}

// dist.backend = "gloo": each run is loco launch with dist.replicas ranks.
TEST_F(SweepCli, ProcessRunsAreStartedUnderTheLauncher) {
  const fs::path file = sweep("gloo", "\"dist.backend\" = [\"gloo\"]");
  const auto r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto result = nlohmann::json::parse(lines_of(*dir_ / "gloo" / "summary.jsonl").at(0));
  EXPECT_EQ(result.at("replicas"), 2) << result;
  EXPECT_GT(result.at("bytes_sent").get<double>(), 0) << result;  // the ranks exchanged over Gloo
  EXPECT_NE(test::read_text(*dir_ / "gloo" / "backend-gloo.log").find("loco launch: starting ranks 0 to 1"),
            std::string::npos);
}

TEST_F(SweepCli, ADryRunChecksAndListsWithoutTraining) {
  const fs::path file = sweep("dry", "\"train.seed\" = [0, 1, 2]");
  auto r = run_loco({"sweep", file.string(), "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  seed-2: train.seed=2"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(*dir_ / "dry"));
  // The sweep files loco ships stay valid.
  for (const auto& entry : fs::directory_iterator(fs::path(LOCO_SOURCE_DIR) / "bench" / "sweeps")) {
    r = run_loco({"sweep", entry.path().string(), "--dry-run"});
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.output;
  }
  r = run_loco({"sweep", sweep("bad", "\"optim.lr\" = [0.1, 0]").string(), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("run lr-0: optim.lr (0) must be positive"), std::string::npos) << r.output;
  // An axis no run reads trains one run once per value (before: two runs of one loss, said only in their logs);
  // one that some of its runs read is kept.
  r = run_loco({"sweep", sweep("unread", "\"streaming.outer_lr\" = [0.2, 0.9]").string(), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the axis streaming.outer_lr is read by none of its runs (dist.algorithm = \"diloco\" reads "
                          "no [streaming] key)"),
            std::string::npos)
      << r.output;
  r = run_loco({"sweep",
                sweep("partly", "\"dist.algorithm\" = [\"diloco\", \"streaming\"]\n\"streaming.outer_lr\" = [0.2, 0.9]")
                    .string(),
                "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Ten million runs: refused at once, before they are listed (which took minutes and gigabytes).
  std::string seven_axes;
  for (const char* key : {"train.seed", "optim.lr", "optim.warmup_steps", "train.steps", "train.batch_size",
                          "optim.weight_decay", "optim.beta2"}) {
    seven_axes += fmt::format("\"{}\" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n", key);
  }
  r = run_loco_within(60, {"sweep", sweep("huge", seven_axes).string(), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the axes make more than 10000 runs"), std::string::npos) << r.output;
}

// Note "own-directories": the sweep's logs and tables are not written into data or a checkpoint either.
TEST_F(SweepCli, ASweepIsNotWrittenIntoADataDirectory) {
  const fs::path data = *dir_ / "data";
  std::string file = test::read_text(sweep("into_data", "\"train.seed\" = [0]"));
  file.replace(file.find((*dir_ / "into_data").string()), (*dir_ / "into_data").string().size(), data.string());
  write_text(*dir_ / "into_data.toml", file);
  std::size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(data)) entries += entry.is_regular_file();
  for (const char* mode : {"--dry-run", "--jobs"}) {
    std::vector<std::string> args = {"sweep", (*dir_ / "into_data.toml").string(), mode};
    if (std::string(mode) == "--jobs") args.push_back("1");
    const auto r = run_loco(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("is a prepared data directory"), std::string::npos) << r.output;
  }
  std::size_t after = 0;
  for (const auto& entry : fs::directory_iterator(data)) after += entry.is_regular_file();
  EXPECT_EQ(after, entries);
  // Nor into a run's directory (before: a second sweep there was deleted when the first trained that run again).
  for (const auto& [run, made] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"a-run", {"config.toml", "metrics.jsonl"}}, {"a-sweeps-run", {"sweep_result.json"}}}) {
    for (const std::string& name : made) write_text(*dir_ / run / name, "{}");
    std::string inside = test::read_text(sweep("into_run", "\"train.seed\" = [0]"));
    inside.replace(inside.find((*dir_ / "into_run").string()), (*dir_ / "into_run").string().size(),
                   (*dir_ / run / "sub").string());
    write_text(*dir_ / "into_run.toml", inside);
    const auto r = run_loco({"sweep", (*dir_ / "into_run.toml").string(), "--dry-run"});
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("is inside the directory of a run (" + (*dir_ / run).string() + ")"), std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(*dir_ / run / "sub"));
  }
}

// The pids of processes whose command line mentions `text` (a sweep's runs name their out_dir).
std::vector<pid_t> processes_naming(const std::string& text) {
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string command;
    try {
      command = test::read_text(entry.path() / "cmdline");
    } catch (const std::exception&) {
      continue;  // it ended meanwhile
    }
    if (command.find(text) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

// A sweep that is stopped stops its runs: SIGTERM stops the runs in progress at their next step (loco train's
// graceful stop) and starts no other, and the sweep exits 143; killed outright (SIGKILL), its runs get SIGTERM
// as it dies. Before, both left the runs training to the end under init, racing the sweep started again.
TEST_F(SweepCli, AStoppedSweepLeavesNoRunBehind) {
  for (const int signal : {SIGTERM, SIGKILL}) {
    const std::string name = signal == SIGTERM ? "stopped" : "killed";
    const fs::path out = *dir_ / name;
    const fs::path file = sweep(name, "\"train.seed\" = [1, 2, 3]");
    std::string text = test::read_text(file);
    text.replace(text.find("[set]\n"), 6, "[set]\n\"train.steps\" = 1000000\n");  // longer than the test
    write_text(file, text);
    const pid_t sweep_pid = test::start_loco({"sweep", file.string()}, out.string() + ".out", out.string() + ".err");
    // A failed assertion returns at once: the sweep is killed then, and its runs end with it (as tested below).
    struct KillOnReturn {
      pid_t pid;
      ~KillOnReturn() {
        if (pid > 0) ::kill(pid, SIGKILL);
      }
    } guard{sweep_pid};
    ASSERT_TRUE(test::eventually(
        [&] { return fs::exists(out / "seed-1" / "metrics.jsonl") && fs::exists(out / "seed-2" / "metrics.jsonl"); },
        std::chrono::seconds(120)))
        << test::read_text(out.string() + ".err");
    ASSERT_EQ(processes_naming(out.string() + "/").size(), 2u);  // the two runs of jobs = 2
    ::kill(sweep_pid, signal);
    const int status = test::wait_exit(sweep_pid, std::chrono::seconds(120));
    guard.pid = -1;
    EXPECT_EQ(status, 128 + signal) << test::read_text(out.string() + ".err");
    EXPECT_TRUE(
        test::eventually([&] { return processes_naming(out.string() + "/").empty(); }, std::chrono::seconds(60)))
        << "runs of the " << name << " sweep still running";
    EXPECT_FALSE(fs::exists(out / "seed-3")) << "a run started after the stop";
    if (signal == SIGTERM) {
      const std::string said = test::read_text(out.string() + ".out") + test::read_text(out.string() + ".err");
      EXPECT_NE(said.find("seed-1: stopped (the sweep was stopped; run it again to redo this run)"), std::string::npos)
          << said;
      // Each run stopped as loco train stops: at a step, with a checkpoint.
      EXPECT_NE(test::read_text(out / "seed-1.log").find("stopped by SIGTERM after step"), std::string::npos);
    }
  }
}

// --tables-only tabulates what has a result (e.g. while the sweep runs elsewhere) and trains nothing.
TEST_F(SweepCli, TablesOnlyListsTheFinishedRunsWithoutTrainingTheOthers) {
  const fs::path file = sweep("tables", "\"train.seed\" = [0, 1]");
  // Before any run: said so (before: "cannot create …/.summary.csv.tmp-PID: No such file or directory").
  auto r = run_loco({"sweep", file.string(), "--tables-only"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no run of this sweep has started"), std::string::npos) << r.output;
  r = run_loco({"sweep", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::remove_all(*dir_ / "tables" / "seed-1");
  fs::remove(*dir_ / "tables" / "summary.csv");
  r = run_loco({"sweep", file.string(), "--tables-only"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("summary: 1 run(s) with a result listed in"), std::string::npos) << r.output;
  const auto csv = lines_of(*dir_ / "tables" / "summary.csv");
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[1].rfind("seed-0,0,", 0), 0u) << csv[1];
  EXPECT_FALSE(fs::exists(*dir_ / "tables" / "seed-1"));
  // A result edited by hand is named, not copied into the tables (a loss of "abc" was, with exit 0).
  const fs::path result = *dir_ / "tables" / "seed-0" / "sweep_result.json";
  auto edited = nlohmann::json::parse(test::read_text(result));
  edited["loss"] = "abc";
  test::write_text(result, edited.dump());
  r = run_loco({"sweep", file.string(), "--tables-only"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("sweep_result.json is damaged (its field 'loss' is \"abc\", not a number): delete it"),
            std::string::npos)
      << r.output;
  edited["loss"] = 3.5;
  edited["name"] = "seed-1";
  test::write_text(result, edited.dump());
  r = run_loco({"sweep", file.string(), "--tables-only"});
  EXPECT_NE(r.output.find("is damaged (it holds the result of run \"seed-1\")"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace loco
