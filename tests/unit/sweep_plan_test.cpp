#include "loco/sweep/sweep_plan.h"

#include <gtest/gtest.h>

#include "loco/util/error.h"
#include "support/test_support.h"

namespace loco {
namespace {

using test::ScratchDir;
using test::write_text;

const std::string kBase = test::tiny_model_toml("data/x") + "[train]\nsteps = 10\nbatch_size = 2\n";

SweepPlan plan_of(const ScratchDir& dir, const std::string& sweep) {
  write_text(dir / "base.toml", kBase);
  write_text(dir / "sweep.toml", sweep);
  return read_sweep_plan(dir / "sweep.toml");
}

std::string plan_error(const std::string& sweep) {
  ScratchDir dir;
  try {
    plan_of(dir, sweep);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepPlan, ExpandsEveryCombinationInTheFilesOrder) {
  ScratchDir dir;
  const SweepPlan plan = plan_of(dir, R"(
base = "base.toml"
out_dir = "runs/s"
threads = 2
[set]
"train.steps" = 40
[axes]
"dist.algorithm" = ["ddp", "diloco"]
[axes.optim]
lr = [1e-3, 0.003, 2.5e-2]
)");
  EXPECT_EQ(plan.base, dir / "base.toml");  // relative to the sweep file
  EXPECT_EQ(plan.out_dir, "runs/s");
  ASSERT_EQ(plan.axes, (std::vector<std::string>{"dist.algorithm", "optim.lr"}));
  ASSERT_EQ(plan.runs.size(), 6u);
  // The first axis varies slowest; names from each axis's last part and the value.
  EXPECT_EQ(plan.runs[0].name, "algorithm-ddp_lr-0.001");
  EXPECT_EQ(plan.runs[1].name, "algorithm-ddp_lr-0.003");
  EXPECT_EQ(plan.runs[2].name, "algorithm-ddp_lr-0.025");
  EXPECT_EQ(plan.runs[3].name, "algorithm-diloco_lr-0.001");
  EXPECT_EQ(plan.runs[5].overrides,
            (std::vector<std::string>{"train.steps=40", "train.threads=2", "dist.algorithm=diloco", "optim.lr=0.025",
                                      "train.out_dir=runs/s/algorithm-diloco_lr-0.025"}));
  EXPECT_EQ(plan.runs[5].steps, 40);  // the completed config's
  EXPECT_EQ(plan.runs[5].data_dir, "data/x");
  EXPECT_FALSE(plan.runs[5].launched);
}

TEST(SweepPlan, AxesSharingALastPartAreNamedInFullAndValuesAreMadeSafe) {
  ScratchDir dir;
  const SweepPlan plan = plan_of(dir, R"(
base = "base.toml"
out_dir = "o"
[axes]
"diloco.sync_every" = [10]
"noloco.sync_every" = [20]
"data.dir" = ["data/a b"]
"train.seed" = [0]
"optim.lr" = [3e-4]
)");
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(plan.runs[0].name, "diloco-sync_every-10_noloco-sync_every-20_dir-data_a_b_seed-0_lr-0.0003");
  EXPECT_EQ(plan.runs[0].data_dir, "data/a b");  // the value itself is passed on unchanged
}

TEST(SweepPlan, GridsAddTheirSettingsAndAxesToTheFilesOwn) {
  ScratchDir dir;
  const SweepPlan plan = plan_of(dir, R"(
base = "base.toml"
out_dir = "o"
[set]
"dist.replicas" = 2
[axes]
"train.seed" = [0, 1]
[[grid]]
name = "dp"
[grid.set]
"dist.algorithm" = "ddp"
[[grid]]
name = "diloco"
[grid.set]
"dist.algorithm" = "diloco"
[grid.axes]
"diloco.outer_lr" = [0.5, 0.7]
)");
  ASSERT_EQ(plan.runs.size(), 6u);
  EXPECT_EQ(plan.axes, (std::vector<std::string>{"train.seed", "diloco.outer_lr"}));
  EXPECT_EQ(plan.runs[1].name, "dp_seed-1");
  EXPECT_EQ(plan.runs[1].overrides, (std::vector<std::string>{"dist.replicas=2", "dist.algorithm=ddp", "train.threads=1",
                                                              "train.seed=1", "train.out_dir=o/dp_seed-1"}));
  EXPECT_EQ(plan.runs[5].name, "diloco_seed-1_outer_lr-0.7");
  EXPECT_EQ(plan.runs[5].axis_values.size(), 2u);
  const std::string head = "base = \"base.toml\"\nout_dir = \"o\"\n";
  EXPECT_NE(plan_error(head + "[[grid]]\n[grid.set]\n\"train.seed\" = 1\n").find("each [[grid]] needs a name"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[[grid]]\nname = \"a\"\nsets = 1\n").find("unknown key 'grid.sets'"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[[grid]]\nname = \"a\"\n[[grid]]\nname = \"a\"\n")
                .find("two runs would share the directory 'a'"),
            std::string::npos);
}

TEST(SweepPlan, WithoutAxesThereIsOneRun) {
  ScratchDir dir;
  const SweepPlan plan = plan_of(dir, "base = \"base.toml\"\nout_dir = \"o\"\n");
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(plan.runs[0].name, "run");
}

// A grid named "." or ".." would put its run in the sweep's directory or its parent, which a retry clears as
// an earlier attempt (finished runs were deleted): refused before anything runs.
TEST(SweepPlan, ARunNamedOnlyWithDotsIsRefused) {
  for (const std::string name : {".", "..", "..."}) {
    const std::string error =
        plan_error("base = \"base.toml\"\nout_dir = \"o\"\n[[grid]]\nname = \"" + name + "\"\n");
    EXPECT_NE(error.find("a run would be named '" + name + "', which is not a directory of its own"), std::string::npos)
        << error;
  }
  EXPECT_EQ(plan_error("base = \"base.toml\"\nout_dir = \"o\"\n[[grid]]\nname = \".a\"\n"), "no error");
}

// The sweep's own files sit beside the runs' directories (NAME.log, summary.csv, cells.jsonl): a run named like
// one replaced it (a run 'a.log' took run a's log; 'summary.csv' failed the tables after every run trained).
TEST(SweepPlan, ARunNamedLikeTheSweepsOwnFilesIsRefused) {
  for (const std::string name : {"a.log", "summary.csv", "cells.jsonl"}) {
    const std::string error = plan_error("base = \"base.toml\"\nout_dir = \"o\"\n[[grid]]\nname = \"" + name + "\"\n");
    EXPECT_NE(error.find("a run would be named '" + name + "', which ends as the sweep's own files do"),
              std::string::npos)
        << error;
  }
  EXPECT_EQ(plan_error("base = \"base.toml\"\nout_dir = \"o\"\n[[grid]]\nname = \"a.logs\"\n"), "no error");
}

// A run's name is a directory and part of file names beside it: one too long for a file name is refused at plan
// time (also for --dry-run), not when its directory is made after earlier runs trained (audit round 3: an abort).
TEST(SweepPlan, ARunNameTooLongForAFileNameIsRefused) {
  const std::string error =
      plan_error("base = \"base.toml\"\nout_dir = \"o\"\n[[grid]]\nname = \"" + std::string(201, 'g') + "\"\n");
  EXPECT_NE(error.find("(201 bytes), too long for a file name (at most 200)"), std::string::npos) << error;
  EXPECT_EQ(plan_error("base = \"base.toml\"\nout_dir = \"o\"\n[[grid]]\nname = \"" + std::string(200, 'g') + "\"\n"),
            "no error");
}

TEST(SweepPlan, LaunchedRunsNeedTheirRankCount) {
  ScratchDir dir;
  const SweepPlan plan = plan_of(dir, R"(
base = "base.toml"
out_dir = "o"
[set]
"dist.algorithm" = "diloco"
"dist.backend" = "gloo"
"dist.replicas" = 2
)");
  EXPECT_TRUE(plan.runs[0].launched);
  EXPECT_EQ(plan.runs[0].replicas, 2);
  EXPECT_NE(plan_error("base = \"base.toml\"\nout_dir = \"o\"\n[set]\n\"dist.algorithm\" = \"diloco\"\n"
                       "\"dist.backend\" = \"gloo\"\n")
                .find("set dist.replicas (in [set] or an axis) to how many ranks to start"),
            std::string::npos);
}

TEST(SweepPlan, ACompoundAxisSetsSeveralKeysPerValue) {
  ScratchDir dir;
  const SweepPlan plan = plan_of(dir, R"(
base = "base.toml"
out_dir = "o"
[axes]
size = [{name = "s", "model.hidden_size" = 32, "train.steps" = 20},
        {name = "m", model = {hidden_size = 64, num_hidden_layers = 3}, "train.steps" = 40}]
"optim.lr" = [1e-3]
)");
  ASSERT_EQ(plan.runs.size(), 2u);
  EXPECT_EQ(plan.axes, (std::vector<std::string>{"size", "optim.lr"}));
  EXPECT_EQ(plan.runs[1].name, "size-m_lr-0.001");
  EXPECT_EQ(plan.runs[1].axis_values.front(), (std::pair<std::string, std::string>{"size", "m"}));
  EXPECT_EQ(plan.runs[1].overrides,
            (std::vector<std::string>{"train.threads=1", "model.hidden_size=64", "model.num_hidden_layers=3",
                                      "train.steps=40", "optim.lr=0.001", "train.out_dir=o/size-m_lr-0.001"}));
  EXPECT_EQ(plan.runs[0].steps, 20);
  EXPECT_EQ(plan.runs[1].steps, 40);
  const std::string head = "base = \"base.toml\"\nout_dir = \"o\"\n[axes]\n";
  EXPECT_NE(plan_error(head + "size = [{\"model.hidden_size\" = 32}]\n").find("each value of a compound axis is a "
                                                                             "table with a name"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "\"model.size\" = [{name = \"s\"}]\n").find("name it without a '.'"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "size = [{name = \"s\"}, 3]\n").find("mix no tables"), std::string::npos);
  EXPECT_NE(plan_error(head + "size = [{name = \"s\", \"train.out_dir\" = \"x\"}]\n").find("set the sweep's out_dir"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "\"optim.lr\" = [0.1, 0.1]\n").find("lists a value twice"), std::string::npos);
  // A compound value's settings are checked like any run's.
  EXPECT_NE(plan_error(head + "size = [{name = \"s\", \"model.hidden_size\" = 30}]\n").find("run size-s: "),
            std::string::npos);
}

TEST(SweepPlan, CellsLeaveOutTheTunedAxesAndEveryRepeatIsChecked) {
  ScratchDir dir;
  const SweepPlan plan = plan_of(dir, R"(
base = "base.toml"
out_dir = "o"
[axes]
"model.hidden_size" = [32, 64]
"optim.lr" = [1e-3, 2e-3]
[best]
tuned = ["optim.lr"]
[best.repeat]
"train.seed" = [1, 2]
)");
  ASSERT_EQ(plan.runs.size(), 4u);
  EXPECT_EQ(plan.runs[0].cell, "hidden_size-32");
  EXPECT_EQ(plan.runs[1].cell, "hidden_size-32");
  EXPECT_EQ(plan.runs[3].cell, "hidden_size-64");
  EXPECT_EQ(plan.axes, (std::vector<std::string>{"model.hidden_size", "optim.lr", "train.seed"}));
  const auto repeats = repeats_of(plan, plan.runs[3]);
  ASSERT_EQ(repeats.size(), 2u);
  EXPECT_EQ(repeats[1].name, "hidden_size-64_lr-0.002_seed-2");
  EXPECT_EQ(repeats[1].repeat_of, "hidden_size-64_lr-0.002");
  EXPECT_EQ(repeats[1].cell, "hidden_size-64");
  EXPECT_EQ(repeats[1].overrides.back(), "train.out_dir=o/hidden_size-64_lr-0.002_seed-2");
  EXPECT_EQ(repeats[1].overrides[repeats[1].overrides.size() - 2], "train.seed=2");
  EXPECT_EQ(repeats[1].axis_values.back(), (std::pair<std::string, std::string>{"train.seed", "2"}));
  const std::string head = "base = \"base.toml\"\nout_dir = \"o\"\n[axes]\n\"optim.lr\" = [1e-3]\n";
  EXPECT_NE(plan_error(head + "[best]\ntuned = [\"optim.lrr\"]\n").find("best.tuned names 'optim.lrr', which is no axis"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[best]\ntuned = [\"optim.lr\"]\n[best.repeat]\n\"optim.lr\" = [2e-3]\n")
                .find("best.repeat.optim.lr is also an axis"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[best]\nrepeat = {}\n").find("best.tuned must list the axes"), std::string::npos);
  // A repeat's config is checked up front, naming the repeat.
  EXPECT_NE(plan_error(head + "[best]\ntuned = [\"optim.lr\"]\n[best.repeat]\n\"train.steps\" = [-1]\n")
                .find("run lr-0.001_steps--1: "),
            std::string::npos);
}

// "1,2,…,n" as a TOML array's items.
std::string first_integers(int n) {
  std::string out;
  for (int i = 1; i <= n; ++i) out += (i > 1 ? "," : "") + std::to_string(i);
  return out;
}

TEST(SweepPlan, RepeatsCountAgainstTheCapOnRuns) {
  // 100 runs in 10 cells: 10 cells × 1,000 seeds = 10,000 repeats, 10,100 processes in all.
  // (Learning rates of 1 to 10, only counted here: without weight decay, which AdamW would multiply by lr.)
  const std::string head =
      "base = \"base.toml\"\nout_dir = \"o\"\n[set]\n\"optim.weight_decay\" = 0\n[axes]\n\"optim.lr\" = [" +
      first_integers(10) + "]\n\"optim.warmup_steps\" = [" + first_integers(10) +
      "]\n[best]\ntuned = [\"optim.lr\"]\n[best.repeat]\n";
  EXPECT_NE(plan_error(head + "\"train.seed\" = [" + first_integers(1000) + "]\n")
                .find("make more than 10000 runs (100 grid runs, and 10000 repeats: 10 cells, each best run repeated "
                      "1000 times)"),
            std::string::npos);
  // 50 seeds fit: 600 processes, 5,000 repeats to check.
  ScratchDir dir;
  EXPECT_EQ(plan_of(dir, head + "\"train.seed\" = [" + first_integers(50) + "]\n").runs.size(), 100u);
  // One cell tuned over 1,000 values with 200 seeds: 1,200 processes, but 200,000 repeats to check.
  const std::string one_cell =
      "base = \"base.toml\"\nout_dir = \"o\"\n[axes]\n\"optim.lr\" = [" + first_integers(1000) +
      "]\n[best]\ntuned = [\"optim.lr\"]\n[best.repeat]\n\"train.seed\" = [" + first_integers(200) + "]\n";
  EXPECT_NE(plan_error(one_cell).find("1000 grid runs with 200 repeat combinations each make 200000 repeats to check"),
            std::string::npos);
}

TEST(SweepPlan, AProfileReplacesSettingsAndAxesByKey) {
  ScratchDir dir;
  const std::string sweep = R"(
base = "base.toml"
out_dir = "runs/cpu"
jobs = 2
[set]
"train.steps" = 20
"optim.lr" = 1e-3
[axes]
size = [{name = "s", "model.hidden_size" = 32}]
[[grid]]
name = "dp"
[grid.set]
"dist.algorithm" = "ddp"
[profile.big]
out_dir = "runs/big"
jobs = 1
threads = 0
[profile.big.set]
"train.steps" = 80
"train.device" = "auto"
[profile.big.axes]
size = [{name = "l", "model.hidden_size" = 64}, {name = "xl", "model.hidden_size" = 128}]
)";
  const SweepPlan plain = plan_of(dir, sweep);
  EXPECT_EQ(plain.runs.size(), 1u);
  EXPECT_EQ(plain.runs[0].steps, 20);
  EXPECT_EQ(plain.runs[0].device, "cpu");  // where its final evaluation runs, as its training
  write_text(dir / "sweep.toml", sweep);
  const SweepPlan big = read_sweep_plan(dir / "sweep.toml", "big");
  EXPECT_EQ(big.out_dir, "runs/big");
  EXPECT_EQ(big.jobs, 1);
  EXPECT_EQ(big.threads, 0);
  ASSERT_EQ(big.runs.size(), 2u);
  EXPECT_EQ(big.runs[1].name, "dp_size-xl");
  EXPECT_EQ(big.runs[1].steps, 80);
  EXPECT_EQ(big.runs[1].device, "auto");
  EXPECT_EQ(big.runs[1].overrides,
            (std::vector<std::string>{"optim.lr=0.001", "dist.algorithm=ddp", "train.steps=80", "train.device=auto",
                                      "train.threads=0", "model.hidden_size=128", "train.out_dir=runs/big/dp_size-xl"}));
  const auto error_of = [&](const std::string& text, const std::string& profile) -> std::string {
    write_text(dir / "sweep.toml", text);
    try {
      read_sweep_plan(dir / "sweep.toml", profile);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  // A profile's own grids replace the file's.
  write_text(dir / "sweep.toml", sweep + R"(
[[profile.wide.grid]]
name = "diloco"
[profile.wide.grid.set]
"dist.algorithm" = "diloco"
[profile.wide.grid.axes]
"diloco.outer_lr" = [0.4, 0.8]
)");
  const SweepPlan wide = read_sweep_plan(dir / "sweep.toml", "wide");
  ASSERT_EQ(wide.runs.size(), 2u);
  EXPECT_EQ(wide.runs[1].name, "diloco_size-s_outer_lr-0.8");
  EXPECT_EQ(wide.runs[1].overrides.front(), "train.steps=20");  // the file's [set] still applies
  EXPECT_NE(error_of(sweep, "gpu").find("no [profile.gpu] in this file; its profiles: big"), std::string::npos);
  EXPECT_NE(error_of(sweep + "[profile.x.axes]\n\"optim.lr\" = [1]\n", "x")
                .find("profile.x.axes.optim.lr replaces an axis the file does not have"),
            std::string::npos);
  EXPECT_NE(error_of(sweep + "[profile.y.set]\nsize = 1\n", "y").find("profile.y.set.size is an axis of the file"),
            std::string::npos);
  EXPECT_NE(error_of(sweep + "[profile.z]\nbase = \"b\"\n", "z").find("unknown key 'profile.z.base'"),
            std::string::npos);
}

TEST(SweepPlan, MistakesAreRefusedBeforeAnythingRuns) {
  const std::string head = "base = \"base.toml\"\nout_dir = \"o\"\n";
  EXPECT_NE(plan_error(head + "job = 2\n").find("unknown key 'job'; a sweep file has base, out_dir, jobs"),
            std::string::npos);
  EXPECT_NE(plan_error("out_dir = \"o\"\n").find("base is missing or not a string"), std::string::npos);
  EXPECT_NE(plan_error("base = \"base.toml\"\nout_dir = \"\"\n")
                .find("out_dir is empty: write out_dir = \"...\" with a path"),
            std::string::npos);
  EXPECT_NE(plan_error("base = \"\"\nout_dir = \"o\"\n").find("base is empty"), std::string::npos);
  EXPECT_NE(plan_error("base = \"absent.toml\"\nout_dir = \"o\"\n").find("config file"), std::string::npos);
  EXPECT_NE(plan_error(head + "jobs = 0\n").find("jobs must be a whole number from 1 to 1024"), std::string::npos);
  EXPECT_NE(plan_error(head + "jobs = 2147483648\n").find("jobs must be a whole number from 1 to 1024"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "threads = 100000\n").find("threads must be a whole number from 0 to 4096"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"optim.lr\" = []\n").find("axes.optim.lr must be a non-empty array"),
            std::string::npos);
  // A key set twice by one table, quoted and nested, or by two axes: runs named for one value trained with the
  // other's.
  EXPECT_NE(plan_error(head + "[axes.model]\nhidden_size = [32, 48]\n[axes]\n\"model.hidden_size\" = [64]\n")
                .find("model.hidden_size is set twice: by the axis model.hidden_size and by the axis "
                      "model.hidden_size"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[set]\n\"train.seed\" = 1\n[set.train]\nseed = 2\n")
                .find("train.seed is set twice: by [set] train.seed and by [set] train.seed"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"optim.lr\" = [0.1, 0.3]\nsize = [{name = \"s\", \"optim.lr\" = 0.2}]\n")
                .find("optim.lr is set twice: by the axis optim.lr and by the axis size"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"optim.lr\" = 0.1\n").find("non-empty array"), std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"optim.lr\" = [[0.1]]\n").find("a number, a string or true/false"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[set]\n\"train.out_dir\" = \"x\"\n").find("set the sweep's out_dir"), std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"train.threads\" = [1, 2]\n").find("set the sweep's threads"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[eval]\nbatch = 3\n").find("unknown key 'eval.batch'"), std::string::npos);
  // A run's config is checked as loco train checks it, naming the run.
  EXPECT_NE(plan_error(head + "[axes]\n\"optim.lrr\" = [0.1]\n").find("run lrr-0.1: "), std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"optim.lr\" = [0.1, -1]\n").find("run lr--1: "), std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"dist.algorithm\" = [\"diloco\", \"d/iloco\", \"d_iloco\"]\n")
                .find("two runs would share the directory 'algorithm-d_iloco'"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "[axes]\n\"x\" = [" + std::string(100, '[')).find("nest more than 64 deep"),
            std::string::npos);
}

}  // namespace
}  // namespace loco
