// loco train / eval / generate / export as a user runs them: the happy path end to end, and the
// error paths of docs/design.md §4 (clear message, non-zero exit, nothing good overwritten).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "loco/util/directory_lock.h"
#include "loco/util/utf8.h"
#include "support/test_support.h"
#include "unit/data_test_helpers.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::run_loco;
using test::ScratchDir;
using test::write_text;

// Prepares byte-level data and writes a tiny config; the tests share one data directory.
class TrainCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    test::prepare_tiny_byte_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  fs::path config(const std::string& run, const std::string& extra = "") {
    const fs::path path = *dir_ / (run + ".toml");
    write_text(path, test::tiny_model_toml((*dir_ / "data").string()) + fmt::format(R"([optim]
lr = 3e-3
warmup_steps = 2
[train]
steps = 6
batch_size = 4
eval_every = 3
eval_batches = 2
log_every = 1
threads = 1
out_dir = "{}"
{}
)",
                                                                                    (*dir_ / run).string(), extra));
    return path;
  }

  static ScratchDir* dir_;
};
ScratchDir* TrainCli::dir_ = nullptr;

void expect_error(const test::CommandResult& r, int code, const std::string& text) {
  EXPECT_EQ(r.exit_code, code) << r.output;
  EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

// An outer step that diloco.drop_rate leaves every replica out of is said, once, as a step left out for NaN is
// (before: with a rate near 1 the run trained nothing and said nothing). Steps 2 and 4: 0.99 drops both replicas
// at each with odds of 98%; the seeded draw for this run's seed drops them at step 2 at least.
TEST_F(TrainCli, AnOuterStepThatLeavesEveryReplicaOutIsSaid) {
  const auto r = run_loco({"train", "--config", config("dropped").string(), "--set", "dist.algorithm=diloco", "--set",
                           "dist.replicas=2", "--set", "diloco.sync_every=2", "--set", "diloco.drop_rate=0.99", "--set",
                           "train.steps=4"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("diloco: the outer step of all parameters after step 2 left out every replica's "
                          "pseudo-gradient (diloco.drop_rate = 0.99)"),
            std::string::npos)
      << r.output;
}

TEST_F(TrainCli, TrainEvalGenerateExportEndToEnd) {
  auto r = run_loco({"train", "--config", config("e2e").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("validation loss"), std::string::npos) << r.output;
  const fs::path checkpoint = *dir_ / "e2e" / "checkpoints" / "step_6";

  r = run_loco({"eval", "--checkpoint", checkpoint.string(), "--data", (*dir_ / "data").string(), "--batches", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto line = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_GT(line.at("loss").get<double>(), 0.0);
  EXPECT_NEAR(line.at("perplexity").get<double>(), std::exp(line.at("loss").get<double>()), 1e-6);
  EXPECT_EQ(line.at("tokens"), 2 * 4 * 16);

  r = run_loco({"generate", "--checkpoint", checkpoint.string(), "--prompt", "the jury", "--tokens", "12"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("the jury", 0), 0u) << r.output;
  EXPECT_GT(r.output.size(), std::string("the jury\n").size());
  // What generate prints is UTF-8: a byte model samples any byte (before: raw, invalid UTF-8 out), and a prompt
  // that is not UTF-8 is refused (before: shown as given and continued as something else).
  for (const char* seed : {"1", "2", "3"}) {
    r = run_loco({"generate", "--checkpoint", checkpoint.string(), "--prompt", "caf\xC3\xA9", "--tokens", "40",
                  "--seed", seed, "--temperature", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(first_invalid_utf8(r.output), std::nullopt) << seed << ": " << r.output;
  }
  expect_error(run_loco({"generate", "--checkpoint", checkpoint.string(), "--prompt", "\xFF abc"}), 2,
               "--prompt is not UTF-8 text: byte 0 (0xFF)");

  r = run_loco({"export", "--checkpoint", checkpoint.string(), "--out", (*dir_ / "hf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(*dir_ / "hf" / "config.json");
  const auto hf = nlohmann::json::parse(in);
  EXPECT_EQ(hf.at("model_type"), "llama");
  EXPECT_EQ(hf.at("vocab_size"), 258);
  EXPECT_EQ(hf.at("intermediate_size"), 96);
  EXPECT_TRUE(fs::exists(*dir_ / "hf" / "model.safetensors"));
  // A trailing slash names the same new directory.
  r = run_loco({"export", "--checkpoint", checkpoint.string(), "--out", (*dir_ / "hf2").string() + "/"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(*dir_ / "hf2" / "config.json"));
  // An empty directory a live run holds (a run that has only just begun) is refused and left as it is (audit round
  // 13: the export removed it and took its place, and the run wrote into the export).
  fs::create_directories(*dir_ / "live-run");
  {
    const DirectoryLock live_run(*dir_ / "live-run", "test");
    expect_error(run_loco({"export", "--checkpoint", checkpoint.string(), "--out", (*dir_ / "live-run").string()}), 2,
                 "--out directory '" + (*dir_ / "live-run").string() + "' is being written by another loco process");
    EXPECT_TRUE(fs::is_empty(*dir_ / "live-run"));
  }
  // A second export to the same place is refused.
  expect_error(run_loco({"export", "--checkpoint", checkpoint.string(), "--out", (*dir_ / "hf").string()}), 1,
               "not empty");
  // So is a file (or a device) in the directory's place.
  expect_error(run_loco({"export", "--checkpoint", checkpoint.string(), "--out", (*dir_ / "hf" / "config.json").string()}),
               1, "is a file (or a device), not a directory");
  expect_error(run_loco({"export", "--checkpoint", checkpoint.string(), "--out", "/dev/null"}), 1,
               "/dev/null is a file (or a device), not a directory");
  // A link in the directory's place would be replaced by the rename (a dangling one "appeared while the
  // export was written"); an empty path is the option's mistake (was "cannot use '': Invalid argument").
  fs::create_symlink(*dir_ / "nowhere", *dir_ / "dangling");
  expect_error(run_loco({"export", "--checkpoint", checkpoint.string(), "--out", (*dir_ / "dangling").string()}), 1,
               "dangling is a symbolic link (to " + (*dir_ / "nowhere").string() + "); loco does not replace it");
  EXPECT_TRUE(fs::is_symlink(*dir_ / "dangling"));
  expect_error(run_loco({"export", "--checkpoint", checkpoint.string(), "--out", ""}), 2, "--out: the path is empty");
  expect_error(run_loco({"eval", "--checkpoint", checkpoint.string(), "--data", ""}), 2, "--data: the path is empty");
  // An export given where data or a tokenizer belongs is named as one (before: "malformed (key 'kind' not found)"
  // of loco's own file, and a prepare into it as the fix).
  expect_error(run_loco({"eval", "--checkpoint", checkpoint.string(), "--data", (*dir_ / "hf").string()}), 1,
               "hf is a Hugging Face export (as `loco export` writes), not a prepared data directory");
  write_text(*dir_ / "hf-input.txt", "a document\n");
  expect_error(run_loco({"prepare", "--input", (*dir_ / "hf-input.txt").string(), "--out", (*dir_ / "from-hf").string(),
                         "--tokenizer-from", (*dir_ / "hf").string()}),
               1, "tokenizer.json is a Hugging Face tokenizer (as `loco export` writes)");
  // Without CUDA, asking for it names the option the user gave, not always train.device.
  r = run_loco(
      {"generate", "--checkpoint", checkpoint.string(), "--prompt", "the", "--tokens", "2", "--device", "cuda"});
  if (r.exit_code != 0) {  // this machine has no GPU for this loco
    expect_error(r, 2,
                 "--device cuda, but this loco was built against a CPU-only libtorch or no GPU is visible. Use "
                 "--device cpu (or auto)");
    expect_error(run_loco({"train", "--config", config("e2e-cuda").string(), "--set", "train.device=cuda"}), 2,
                 "train.device = cuda, but this loco was built against a CPU-only libtorch or no GPU is visible. Use "
                 "train.device = cpu (or auto)");
  }
}

// LOCO_PROFILE is tried before the first step: a libtorch without Kineto (Debian's) cannot save a trace, and a run
// asked for one died at the profile's last step with "unexpected error" and without its checkpoint (audit round 11).
TEST_F(TrainCli, AProfileThatCannotBeWrittenIsRefusedBeforeTraining) {
  write_text(*dir_ / "trace.json", "an earlier trace");  // stays: the probe writes beside it
  ::setenv("LOCO_PROFILE", (*dir_ / "trace.json").c_str(), 1);
  ::setenv("LOCO_PROFILE_START", "2", 1);
  ::setenv("LOCO_PROFILE_STEPS", "9223372036854775807", 1);  // its window's end overflowed
  const auto unbounded = run_loco({"train", "--config", config("profile").string()});
  ::setenv("LOCO_PROFILE_STEPS", "1", 1);
  const auto r = run_loco({"train", "--config", config("profile").string()});
  ::setenv("LOCO_PROFILE_START", "100", 1);  // beyond the run's 6 steps: said, and nothing is profiled
  const auto outside = run_loco({"train", "--config", config("profile-outside").string()});
  for (const char* name : {"LOCO_PROFILE", "LOCO_PROFILE_START", "LOCO_PROFILE_STEPS"}) ::unsetenv(name);
  EXPECT_EQ(outside.exit_code, 0) << outside.output;
  EXPECT_NE(outside.output.find("LOCO_PROFILE_START=100 and LOCO_PROFILE_STEPS=1 lie outside this run's steps 1 to 6"),
            std::string::npos)
      << outside.output;
  expect_error(unbounded, 2, "LOCO_PROFILE_STEPS=9223372036854775807 must be a whole number of steps from 1 to");
  if (r.exit_code == 0) {  // a libtorch with Kineto
    EXPECT_NE(test::read_text(*dir_ / "trace.json"), "an earlier trace");
    return;
  }
  expect_error(r, 2, "LOCO_PROFILE: this libtorch cannot write a trace (it was built without Kineto");
  EXPECT_FALSE(fs::exists(*dir_ / "profile" / "checkpoints")) << r.output;
  EXPECT_EQ(test::read_text(*dir_ / "trace.json"), "an earlier trace");
}

// train.keep_checkpoints: the newest N of the run's checkpoints are kept as new ones are written, across a resume
// too, and nothing half-removed is left beside them (audit round 13: every checkpoint was kept, 10 GB for 3,000 of a
// tiny model, until the disk was full).
TEST_F(TrainCli, OnlyTheNewestCheckpointsAreKept) {
  const auto steps_in = [&](const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
    return names;
  };
  ASSERT_EQ(
      run_loco({"train", "--config", config("keep", "checkpoint_every = 1\nkeep_checkpoints = 2").string()}).exit_code,
      0);
  const fs::path checkpoints = *dir_ / "keep" / "checkpoints";
  EXPECT_EQ(steps_in(checkpoints), (std::set<std::string>{"step_5", "step_6"}));
  const auto r = run_loco({"train", "--resume", (checkpoints / "step_6").string(), "--set", "train.steps=9"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(steps_in(checkpoints), (std::set<std::string>{"step_8", "step_9"}));
}

TEST_F(TrainCli, ResumeContinuesAndExtendsARun) {
  ASSERT_EQ(run_loco({"train", "--config", config("extend").string()}).exit_code, 0);
  const fs::path checkpoint = *dir_ / "extend" / "checkpoints" / "step_6";
  expect_error(run_loco({"train", "--resume", checkpoint.string()}), 2, "already at step 6");
  auto r = run_loco({"train", "--resume", checkpoint.string(), "--set", "train.steps=8"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(*dir_ / "extend" / "checkpoints" / "step_8" / "state.json"));
  // A run moved elsewhere goes on where it now lies (before: in the directory its config.toml names, as a second
  // run there, and resuming an older checkpoint was not refused, the later ones being out of sight).
  fs::rename(*dir_ / "extend", *dir_ / "extend-moved");
  const fs::path moved = *dir_ / "extend-moved" / "checkpoints";
  expect_error(run_loco({"train", "--resume", (moved / "step_6").string(), "--set", "train.steps=10"}), 2,
               "every replica of the run wrote step_8, later than the checkpoint you resume from (step_6)");
  r = run_loco({"train", "--resume", (moved / "step_8").string(), "--set", "train.steps=10"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(moved / "step_10" / "state.json"));
  EXPECT_FALSE(fs::exists(*dir_ / "extend"));
  // A run sized by a token budget goes on by a larger one, or by steps, as the "already at step" message says
  // (before: its checkpoint's resolved steps disagreed with every new budget).
  ASSERT_EQ(
      run_loco({"train", "--config", config("budget").string(), "--set", "train.steps=0", "--set", "train.tokens=128"})
          .exit_code,
      0);  // 2 steps of 4 sequences of 16 tokens
  const fs::path budget = *dir_ / "budget" / "checkpoints";
  expect_error(run_loco({"train", "--resume", (budget / "step_2").string()}), 2,
               "(for example --set train.tokens=256)");
  r = run_loco({"train", "--resume", (budget / "step_2").string(), "--set", "train.tokens=256"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_loco({"train", "--resume", (budget / "step_4").string(), "--set", "train.steps=5"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(budget / "step_5" / "state.json"));
  EXPECT_EQ(r.output.find("trained on one of"), std::string::npos) << r.output;
  // Other data of the same tokenizer: the run goes on in them, and says so (before: without a word).
  std::string text;
  for (int i = 0; i < 400; ++i) text += fmt::format("other words {} for another corpus. ", i % 11);
  write_text(*dir_ / "other-text" / "a.txt", text);
  write_text(*dir_ / "other-text" / "b.txt", text + "more");
  ASSERT_EQ(run_loco({"prepare", "--input", (*dir_ / "other-text").string(), "--out", (*dir_ / "other-data").string(),
                      "--tokenizer", "byte", "--val-fraction", "0.5"})
                .exit_code,
            0);
  r = run_loco({"train", "--resume", (budget / "step_5").string(), "--set", "train.steps=6", "--set",
                "data.dir=" + (*dir_ / "other-data").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loco train: note: the training split of " + (*dir_ / "other-data").string() + " holds"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("it goes on in these data from its saved position"), std::string::npos) << r.output;
  // Another replica count is named first (it was the checkpoint's micro-batch, resolved for its replicas).
  expect_error(run_loco({"train", "--resume", (moved / "step_10").string(), "--set", "train.steps=12", "--set",
                         "dist.replicas=2"}),
               2,
               "was written with dist.replicas = 1, but --set gives 2: each replica and stage resumes from its own "
               "part of it");
}

// Audit round 12: a relative data.dir is resolved where the run starts (and, since round 14, its links), so that
// a resume from another working directory (or after a link was pointed elsewhere) reads the same data (before: the path
// was looked up from there, and found other data, trained on without a word, or none, "prepare them"); a checkpoint
// that holds one relative (written before) is refused with where it is relative to.
TEST_F(TrainCli, ARelativeDataDirectoryIsTheOneTheRunStartedWith) {
  fs::create_directories(*dir_ / "started-here");
  fs::create_directory_symlink(*dir_ / "data", *dir_ / "started-here" / "data");
  write_text(*dir_ / "started-here" / "run.toml", test::tiny_model_toml("data") + R"([optim]
warmup_steps = 1
[train]
steps = 2
batch_size = 4
eval_every = 0
eval_batches = 1
threads = 1
out_dir = "run"
)");
  const auto started = test::run_loco_under(120, "/usr/bin/env -C " + (*dir_ / "started-here").string(),
                                            {"train", "--config", "run.toml"});
  ASSERT_EQ(started.exit_code, 0) << started.output;
  const fs::path checkpoint = *dir_ / "started-here" / "run" / "checkpoints" / "step_2";
  const nlohmann::json state = nlohmann::json::parse(test::read_text(checkpoint / "state.json"));
  // started-here/data is a link: the directory it pointed to when the run started is the run's (audit round 14:
  // before, the link was written, and a resume trained on whatever it pointed to then, without a word).
  const std::string data = fs::canonical(*dir_ / "data").string();
  EXPECT_EQ(state["config"]["data"]["dir"], data);
  EXPECT_NE(test::read_text(*dir_ / "started-here" / "run" / "config.toml").find("dir = \"" + data + "\""),
            std::string::npos);
  fs::create_directories(*dir_ / "elsewhere");
  const auto resumed = test::run_loco_under(120, "/usr/bin/env -C " + (*dir_ / "elsewhere").string(),
                                            {"train", "--resume", checkpoint.string(), "--set", "train.steps=3"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  // The same checkpoint as an earlier version wrote it: data.dir as given.
  nlohmann::json relative = state;
  relative["config"]["data"]["dir"] = "data";
  write_text(checkpoint / "state.json", relative.dump(2));
  expect_error(test::run_loco_under(60, "/usr/bin/env -C " + (*dir_ / "elsewhere").string(),
                                    {"train", "--resume", checkpoint.string(), "--set", "train.steps=4"}),
               2,
               "gives data.dir = \"data\", a path relative to the directory its run was started in, and " +
                   (*dir_ / "elsewhere").string() + " holds no such directory");
}

// A checkpoint that cannot be written (a full disk; here the file size limit, ulimit -f) stops the run naming the
// cause and the checkpoint it starts again from, and leaves nothing of the one that failed (before: SIGXFSZ
// killed the process mid-write; on a full disk the message named neither).
TEST_F(TrainCli, ACheckpointThatCannotBeWrittenNamesTheLastWholeOne) {
  ASSERT_EQ(run_loco({"train", "--config", config("file-limit").string()}).exit_code, 0);
  const fs::path checkpoints = *dir_ / "file-limit" / "checkpoints";
  const auto r = test::run_loco_with_file_size_limit(
      120, 64 << 10, {"train", "--resume", (checkpoints / "step_6").string(), "--set", "train.steps=8"});
  expect_error(r, 1, "File too large. The file would be larger than this process may write (ulimit -f)");
  EXPECT_NE(r.output.find("The checkpoint of step 8 was not written and the run stopped; resume from the last "
                          "checkpoint, " +
                          (checkpoints / "step_6").string()),
            std::string::npos)
      << r.output;
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(checkpoints)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"step_6"});
}

// A fixed streaming.overlap changed at a resume is the one trained with from there (before: the checkpoint's
// went on, the losses bit for bit those of the run not changed, while the run said and recorded the new one).
TEST_F(TrainCli, ResumeTrainsWithAChangedStreamingOverlap) {
  const std::vector<std::string> streaming{"--set", "dist.algorithm=streaming", "--set", "dist.replicas=2",
                                           "--set", "streaming.sync_every=4",   "--set", "streaming.fragments=2",
                                           "--set", "streaming.overlap=1",      "--set", "train.steps=12",
                                           "--set", "train.checkpoint_every=4", "--set", "train.eval_every=0"};
  std::vector<std::string> args{"train", "--config", config("overlap").string()};
  args.insert(args.end(), streaming.begin(), streaming.end());
  ASSERT_EQ(run_loco(args).exit_code, 0);
  const auto r = run_loco({"train", "--resume", (*dir_ / "overlap" / "checkpoints" / "step_4").string(), "--set",
                           "train.out_dir=" + (*dir_ / "overlap0").string(), "--set", "streaming.overlap=0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto losses = [](const fs::path& run) {
    std::vector<double> out;
    for (const auto& line : test::read_metrics(run)) {
      if (line.at("step").get<int>() > 4 && line.contains("loss")) out.push_back(line.at("loss").get<double>());
    }
    return out;
  };
  const auto unchanged = losses(*dir_ / "overlap"), changed = losses(*dir_ / "overlap0");
  ASSERT_EQ(changed.size(), 8u);
  EXPECT_NE(changed, unchanged);
  const auto state =
      nlohmann::json::parse(test::read_text(*dir_ / "overlap0" / "checkpoints" / "step_8" / "state.json"));
  EXPECT_EQ(state.at("strategy").at("overlap"), nlohmann::json({0, 0})) << state.at("strategy").dump();
}

// loco eval of a checkpoint gives the loss the run reported at its step, on the same windows: the parameters the
// run evaluates (DiLoCo's θ_g, Streaming's, NoLoCo's φ), not replica 0's own θ (note "evaluated-parameters"). Before,
// DiLoCo's step 3, before any synchronisation, evaluated replica 0's trained θ where the run had evaluated θ_g, and
// Streaming's mixing left its θ off θ_g at every step.
TEST_F(TrainCli, EvalOfACheckpointGivesTheLossTheRunReportedAtItsStep) {
  const std::vector<std::vector<std::string>> algorithms{
      {"dist.algorithm=diloco", "diloco.sync_every=4"},
      {"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2"},
      {"dist.algorithm=noloco", "noloco.sync_every=2"},
      // Each stage of a pipeline replica keeps its part's outer state.
      {"dist.algorithm=diloco", "diloco.sync_every=4", "dist.stages=2"},
      {"dist.algorithm=streaming", "streaming.sync_every=4", "streaming.fragments=2", "dist.stages=2"}};
  int count = 0;
  for (const auto& algorithm : algorithms) {
    const std::string run = fmt::format("evaluated_{}", ++count);
    std::vector<std::string> args{"train",           "--config", config(run).string(),      "--set",
                                  "dist.replicas=2", "--set",    "train.checkpoint_every=3"};
    for (const auto& set : algorithm) args.insert(args.end(), {"--set", set});
    auto r = run_loco(args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const int step : {3, 6}) {
      double reported = -1;
      for (const auto& line : test::read_metrics(*dir_ / run)) {
        if (line.at("step") == step && line.contains("eval_loss")) reported = line.at("eval_loss").get<double>();
      }
      r = run_loco({"eval", "--checkpoint", (*dir_ / run / "checkpoints" / fmt::format("step_{}", step)).string(),
                    "--data", (*dir_ / "data").string(), "--batches", "2", "--batch-size", "4"});
      ASSERT_EQ(r.exit_code, 0) << r.output;
      const auto line = nlohmann::json::parse(r.output.substr(r.output.find('{')));
      EXPECT_NEAR(line.at("loss").get<double>(), reported, 1e-5) << algorithm.back() << " step " << step;
    }
  }
}

// A run that diverges after an outer step with a huge outer learning rate is told the outer step's key too (before:
// only "Lower optim.lr", the wrong key), and, with the plain mean, the robust aggregation.
TEST_F(TrainCli, ADivergenceNamesTheOuterStepsKeys) {
  const auto r =
      run_loco({"train", "--config", config("outer_diverged").string(), "--set", "dist.algorithm=diloco", "--set",
                "dist.replicas=2", "--set", "diloco.sync_every=2", "--set", "diloco.outer_lr=1e30"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("if it diverged just after a synchronisation, lower diloco.outer_lr (now 1e+30), or take a "
                          "robust dist.aggregation"),
            std::string::npos)
      << r.output;
}

// Resumed with a model key changed by --set alone, the refusal says how to leave the key to the checkpoint (before:
// "Drop --config", which was not given); a bf16 run on a machine without a GPU is told to set autocast = "none"
// (before: to set train.device = "cuda", which fails there too).
TEST_F(TrainCli, RefusalsAdviseAFixThatApplies) {
  ASSERT_EQ(run_loco({"train", "--config", config("advice").string()}).exit_code, 0);
  expect_error(run_loco({"train", "--resume", (*dir_ / "advice" / "checkpoints" / "step_6").string(), "--set",
                         "train.steps=8", "--set", "model.hidden_size=64"}),
               2, "without --set model.hidden_size, or with model.hidden_size = 32");
  expect_error(run_loco({"train", "--config", config("bf16").string(), "--set", "train.autocast=bf16", "--set",
                         "train.device=cpu"}),
               2, "Set train.autocast = \"none\" to train on the CPU");
  // A validation split shorter than one window of the model: eval names its own fixes (before: a shorter
  // data.seq_len or fewer replicas, which eval cannot change).
  for (int d = 0; d < 40; ++d)
    write_text(*dir_ / "short_val" / fmt::format("doc{:02}.txt", d), fmt::format("doc {}", d));
  const auto prepared =
      run_loco({"prepare", "--input", (*dir_ / "short_val").string(), "--out", (*dir_ / "short_val_data").string(),
                "--tokenizer", "byte", "--val-fraction", "0.03"});
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  expect_error(run_loco({"eval", "--checkpoint", (*dir_ / "advice" / "checkpoints" / "step_6").string(), "--data",
                         (*dir_ / "short_val_data").string()}),
               1, "evaluate the other split (--split train)");
}

// A static run's checkpoint resumed as an elastic run, and an elastic member's resumed as a static run, are refused
// naming dist.elastic (before: "written by another algorithm", and "incomplete … start the run again").
TEST_F(TrainCli, ACheckpointResumedAsTheOtherKindOfRunNamesDistElastic) {
  const std::vector<std::string> diloco{"--set", "dist.algorithm=diloco",  "--set", "dist.replicas=2",
                                        "--set", "dist.batch=per_replica", "--set", "diloco.sync_every=3"};
  std::vector<std::string> args{"train", "--config", config("static_kind").string()};
  args.insert(args.end(), diloco.begin(), diloco.end());
  ASSERT_EQ(run_loco(args).exit_code, 0);
  std::vector<std::string> resume{"train",
                                  "--resume",
                                  (*dir_ / "static_kind" / "checkpoints" / "step_6").string(),
                                  "--set",
                                  "train.steps=8",
                                  "--set",
                                  "dist.elastic=true"};
  expect_error(run_loco(resume), 2, "is a static run's (written with dist.elastic = false), and this run is elastic");

  args = {"train", "--config", config("elastic_kind").string(), "--set", "dist.elastic=true"};
  args.insert(args.end(), diloco.begin(), diloco.end());
  const auto r = run_loco(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::path member_checkpoint;
  for (const auto& member : fs::directory_iterator(*dir_ / "elastic_kind" / "members")) {
    if (fs::exists(member.path() / "checkpoints" / "step_6"))
      member_checkpoint = member.path() / "checkpoints" / "step_6";
  }
  ASSERT_FALSE(member_checkpoint.empty()) << r.output;
  expect_error(run_loco({"train", "--resume", member_checkpoint.string(), "--set", "train.steps=8", "--set",
                         "dist.elastic=false"}),
               2, "is an elastic member's (written with dist.elastic = true), and this run is static");
}

// Data prepared with another tokenizer than the model's is refused by every use of the checkpoint on
// data: the same ids would stand for other text. (The model's vocabulary of 512 is large enough for
// both, so only the tokenizer check can catch it.)
TEST_F(TrainCli, DataOfAnotherTokenizerIsRefusedByResumeAndEval) {
  ASSERT_EQ(run_loco({"train", "--config", config("mixed").string(), "--set", "model.vocab_size=512"}).exit_code, 0);
  const fs::path checkpoint = *dir_ / "mixed" / "checkpoints" / "step_6";
  for (int i = 0; i < 12; ++i) write_text(*dir_ / "bpe-text" / fmt::format("{}.txt", i), test::generated_document(i, 30));
  auto r = run_loco({"prepare", "--input", (*dir_ / "bpe-text").string(), "--out", (*dir_ / "bpe-data").string(),
                     "--vocab-size", "400"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_error(run_loco({"eval", "--checkpoint", checkpoint.string(), "--data", (*dir_ / "bpe-data").string()}), 1,
               "was prepared with another tokenizer");
  expect_error(run_loco({"train", "--resume", checkpoint.string(), "--set", "train.steps=8", "--set",
                         "data.dir=" + (*dir_ / "bpe-data").string()}),
               1, "loco prepare --tokenizer-from " + checkpoint.string());
}

// `loco prepare --val-fraction 0` (a corpus of one document) says that training then reports no eval loss:
// it trains, evaluates nothing, and says so.
TEST_F(TrainCli, DataWithoutAValidationSplitTrainWithoutEvaluation) {
  write_text(*dir_ / "one-document" / "doc.txt", test::generated_document(0, 200));
  const fs::path data = *dir_ / "no-val-data";
  auto r = run_loco({"prepare", "--input", (*dir_ / "one-document").string(), "--out", data.string(), "--tokenizer",
                     "byte", "--val-fraction", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_loco({"train", "--config", config("no-val").string(), "--set", "data.dir=" + data.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no validation split (prepared with --val-fraction 0): no eval loss"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no validation loss (the data have no validation split)"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_text(*dir_ / "no-val" / "metrics.jsonl").find("eval_loss"), std::string::npos);
  EXPECT_TRUE(fs::exists(*dir_ / "no-val" / "checkpoints" / "step_6"));
}

// A run stopped before its first checkpoint leaves only its metrics: nothing to resume, which the refusal says.
TEST_F(TrainCli, ARunStoppedBeforeItsFirstCheckpointIsNamedAsSuch) {
  write_text(*dir_ / "stopped" / "metrics.jsonl", "{\"step\": 1, \"loss\": 5.5}\n");
  expect_error(run_loco({"train", "--config", config("stopped").string()}), 2,
               "holds the metrics of a run that stopped before its first checkpoint");
  ASSERT_EQ(run_loco({"train", "--config", config("finished").string()}).exit_code, 0);
  expect_error(run_loco({"train", "--config", config("finished").string()}), 2,
               "Pass --resume " + (*dir_ / "finished" / "checkpoints" / "step_6").string());
}

TEST_F(TrainCli, ConfigErrorsNameTheProblem) {
  expect_error(run_loco({"train", "--config", (*dir_ / "absent.toml").string()}), 2, "does not exist");
  expect_error(run_loco({"train", "--config", config("bad1", "warmup = 3").string()}), 2,
               "unknown config key 'train.warmup'");
  expect_error(run_loco({"train", "--config", config("bad2").string(), "--set", "model.num_attention_heads=3"}), 2,
               "not divisible");
  expect_error(run_loco({"train", "--config", config("bad3").string(), "--set", "model.vocab_size=50"}), 2,
               "vocabulary mismatch");
  expect_error(run_loco({"train"}), 2, "--config");
}

// LOCO_FAULT (train/fault_injection.h) is a test and chaos aid; a value it does not know is refused
// before training starts, not ignored.
TEST_F(TrainCli, AMalformedFaultInjectionIsRefused) {
  for (const char* value : {"donating:EXPLODE", "exchanging:CORRUPT", "receiving:CORRUPT", "0:KILL", "soon:KILL", "12"}) {
    ::setenv("LOCO_FAULT", value, 1);
    const auto r = run_loco({"train", "--config", config("fault").string()});
    ::unsetenv("LOCO_FAULT");
    expect_error(r, 2, std::string("LOCO_FAULT=") + value + " is not [NAME@]WHEN:ACTION");
  }
  // An elastic member whose coordinator does not answer: refused before it waits to join (it waited without a
  // word until comm.timeout_s).
  ::setenv("LOCO_FAULT", "garbage", 1);
  ::setenv("LOCO_COORDINATOR", "127.0.0.1:1", 1);
  ::setenv("LOCO_RUN_ID", "fault-run", 1);
  test::use_test_run_secret();
  const auto r = test::run_loco_within(
      30, {"train", "--config", config("fault-elastic").string(), "--set", "dist.elastic=true", "--set",
           "dist.algorithm=diloco", "--set", "dist.backend=gloo", "--set", "dist.batch=per_replica"});
  for (const char* name : {"LOCO_FAULT", "LOCO_COORDINATOR", "LOCO_RUN_ID", "LOCO_RUN_SECRET"}) ::unsetenv(name);
  expect_error(r, 2, "LOCO_FAULT=garbage is not [NAME@]WHEN:ACTION");
}

// Audit round 12: LOCO_COORDINATOR beside a run that joins no coordinator is refused (before: the run trained alone,
// the coordinator never heard of it).
TEST_F(TrainCli, ACoordinatorTheRunWouldNotJoinIsRefused) {
  ::setenv("LOCO_COORDINATOR", "127.0.0.1:9", 1);
  const auto alone = run_loco({"train", "--config", config("not-joined").string()});
  const auto threads =
      run_loco({"train", "--config", config("not-joined").string(), "--set", "dist.elastic=true", "--set",
                "dist.algorithm=diloco", "--set", "dist.batch=per_replica", "--set", "dist.replicas=2"});
  ::unsetenv("LOCO_COORDINATOR");
  expect_error(alone, 2,
               "LOCO_COORDINATOR=127.0.0.1:9 is set, but this run joins no coordinator: dist.elastic = false");
  expect_error(threads, 2, "with dist.backend = \"local\" its replicas are threads under a coordinator of their own");
  EXPECT_FALSE(fs::exists(*dir_ / "not-joined"));
}

// A fault fires in a rank's first process only: the same step, met again by a process that `loco launch
// --elastic` started again (LOCO_RANK_START=2), kills nothing.
TEST_F(TrainCli, AFaultFiresInARanksFirstProcessOnly) {
  ::setenv("LOCO_FAULT", "2:KILL", 1);
  const auto first = run_loco({"train", "--config", config("fault-first").string()});
  ::setenv("LOCO_RANK_START", "2", 1);
  const auto again = run_loco({"train", "--config", config("fault-again").string()});
  ::unsetenv("LOCO_RANK_START");
  ::unsetenv("LOCO_FAULT");
  EXPECT_EQ(first.exit_code, 128 + 9) << first.output;
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

TEST_F(TrainCli, MissingDataAndUnwritableOutputAreReported) {
  expect_error(run_loco({"train", "--config", config("nodata").string(), "--set", "data.dir=/nonexistent/data"}), 1,
               "/nonexistent/data");
  write_text(*dir_ / "a_file", "x");
  expect_error(run_loco({"train", "--config", config("noout").string(), "--set",
                         "train.out_dir=" + (*dir_ / "a_file" / "run").string()}),
               1, "train.out_dir");
}

TEST_F(TrainCli, CorruptedCheckpointIsRefusedAndKept) {
  ASSERT_EQ(run_loco({"train", "--config", config("corrupt").string()}).exit_code, 0);
  const fs::path checkpoint = *dir_ / "corrupt" / "checkpoints" / "step_6";
  {
    std::fstream f(checkpoint / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  const auto size = fs::file_size(checkpoint / "model.safetensors");
  expect_error(run_loco({"eval", "--checkpoint", checkpoint.string(), "--data", (*dir_ / "data").string()}), 1,
               "corrupted");
  expect_error(run_loco({"train", "--resume", checkpoint.string(), "--set", "train.steps=9"}), 1, "corrupted");
  EXPECT_EQ(fs::file_size(checkpoint / "model.safetensors"), size);
  expect_error(run_loco({"generate", "--checkpoint", (*dir_ / "corrupt").string(), "--prompt", "x"}), 1,
               "not a loco checkpoint");
}

}  // namespace
}  // namespace loco
