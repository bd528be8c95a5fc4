// Reading results for `loco fit`: CSV tables and loco run directories, and the errors for files that
// cannot be used.
#include <gtest/gtest.h>

#include <cmath>

#include "loco/sim/csv.h"
#include "loco/sim/fit_data.h"
#include "loco/util/error.h"
#include "support/test_support.h"

namespace loco::sim {
namespace {

template <typename F>
void expect_data_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

const char* kConfig = R"(
[model]
hidden_size = 64
intermediate_size = 0
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
vocab_size = 256
tie_word_embeddings = false

[data]
seq_len = 128

[train]
batch_size = 8
steps = 40

[optim]
lr = 3e-3

[dist]
algorithm = "diloco"
replicas = 4
)";

const char* kMetrics =
    "{\"step\": 10, \"tokens\": 10240, \"loss\": 5.1, \"lr\": 0.003, \"tokens_per_s\": 900, \"elapsed_s\": 11}\n"
    "{\"step\": 20, \"tokens\": 20480, \"loss\": 4.6, \"lr\": 0.003, \"tokens_per_s\": 900, \"elapsed_s\": 22, "
    "\"eval_loss\": 4.8}\n"
    "{\"step\": 30, \"tokens\": 30720, \"loss\": 4.2, \"lr\": 0.003, \"tokens_per_s\": 900, \"elapsed_s\": 33}\n"
    "{\"step\": 40, \"tokens\": 40960, \"loss\": 4.0, \"lr\": 0.003, \"tokens_per_s\": 900, \"elapsed_s\": 44, "
    "\"eval_loss\": 4.4}\n";

// Parameters of kConfig (see SimModelSize.CountsLlamaParametersFromTheModelSection).
constexpr double kBody = 2 * (4096 + 2048 + 2048 + 4096 + 36864 + 128) + 64;
constexpr double kTotal = kBody + 2 * 256 * 64;

TEST(SimFitData, ReadsCsvWithAliasesCommentsAndQuotes) {
  test::ScratchDir dir;
  test::write_text(dir / "r.csv",
                   "# results of the sweep\n"
                   "N,M,eval_loss,Algorithm,lr,batch_size,notes\n"
                   "1e8,2,3.1,DiLoCo,0.001,256,\"a, quoted note\"\n"
                   "\n"
                   "2e8,,2.9,ddp,,,\n");
  auto points = load_points_csv(dir / "r.csv");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_DOUBLE_EQ(points[0].params, 1e8);
  EXPECT_EQ(points[0].replicas, 2);
  EXPECT_EQ(points[0].algorithm, "diloco");
  EXPECT_DOUBLE_EQ(points[0].lr, 0.001);
  EXPECT_DOUBLE_EQ(points[0].batch, 256);
  EXPECT_EQ(points[1].replicas, 1);
  EXPECT_EQ(points[1].algorithm, "dp");
  EXPECT_TRUE(std::isnan(points[1].lr));
  EXPECT_NE(points[1].source.find("line 5"), std::string::npos);
}

TEST(SimFitData, UnusableCsvFilesNameTheProblem) {
  test::ScratchDir dir;
  auto load = [&](const std::string& text) {
    test::write_text(dir / "bad.csv", text);
    return [&] { load_points_csv(dir / "bad.csv"); };
  };
  expect_data_error(load(""), "is empty");
  expect_data_error(load("params,replicas\n1e8,2\n"), "needs a params column and a loss column");
  expect_data_error(load("params,loss\n1e8,3.0,7\n"), "3 fields where the header has 2");
  expect_data_error(load("params,loss\n1e8,-3\n"), "line 2: loss '-3' is not a positive");
  expect_data_error(load("params,loss\n1e8,nan\n"), "not a positive finite decimal number");
  expect_data_error(load("params,loss\n,3\n"), "params value is empty");
  expect_data_error(load("params,loss,replicas\n1e8,3,1.5\n"), "whole number");
  expect_data_error(load("params,loss\n\"1e8,3\n"), "not closed");
  EXPECT_THROW(load_points_csv(dir / "absent.csv"), IoError);
}

TEST(SimFitData, ReadsARunDirectory) {
  test::ScratchDir dir;
  test::write_text(dir / "run" / "config.toml", kConfig);
  test::write_text(dir / "run" / "metrics.jsonl", kMetrics);
  FitPoint p = load_run_directory(dir / "run", ParamConvention::kTotal);
  EXPECT_DOUBLE_EQ(p.params, kTotal);
  EXPECT_DOUBLE_EQ(p.loss, 4.4);  // the last line with eval_loss
  EXPECT_DOUBLE_EQ(p.tokens, 40960);
  EXPECT_EQ(p.replicas, 4);
  EXPECT_EQ(p.algorithm, "diloco");
  EXPECT_DOUBLE_EQ(p.lr, 3e-3);
  EXPECT_DOUBLE_EQ(p.batch, 8 * 128);
  EXPECT_DOUBLE_EQ(load_run_directory(dir / "run", ParamConvention::kNonEmbedding).params, kBody);
}

TEST(SimFitData, RunWithoutDistIsDataParallelWithOneReplica) {
  test::ScratchDir dir;
  std::string config = kConfig;
  config = config.substr(0, config.find("[dist]"));
  test::write_text(dir / "run" / "config.toml", config);
  test::write_text(dir / "run" / "metrics.jsonl", kMetrics);
  FitPoint p = load_run_directory(dir / "run", ParamConvention::kTotal);
  EXPECT_EQ(p.algorithm, "dp");
  EXPECT_EQ(p.replicas, 1);
}

TEST(SimFitData, AHalfWrittenLastLineIsIgnored) {
  test::ScratchDir dir;
  test::write_text(dir / "run" / "config.toml", kConfig);
  test::write_text(dir / "run" / "metrics.jsonl", std::string(kMetrics) + "{\"step\": 50, \"eval_lo");
  EXPECT_DOUBLE_EQ(load_run_directory(dir / "run", ParamConvention::kTotal).loss, 4.4);
}

TEST(SimFitData, UnusableRunsNameTheProblem) {
  test::ScratchDir dir;
  test::write_text(dir / "no_metrics" / "config.toml", kConfig);
  expect_data_error([&] { load_run_directory(dir / "no_metrics", ParamConvention::kTotal); },
                    "metrics.jsonl is missing");
  test::write_text(dir / "no_eval" / "config.toml", kConfig);
  test::write_text(dir / "no_eval" / "metrics.jsonl", "{\"step\": 1, \"loss\": 3}\n");
  expect_data_error([&] { load_run_directory(dir / "no_eval", ParamConvention::kTotal); }, "no line with eval_loss");
  test::write_text(dir / "damaged" / "config.toml", kConfig);
  test::write_text(dir / "damaged" / "metrics.jsonl", "{\"step\": 1}\nnot json\n{\"eval_loss\": 3}\n");
  expect_data_error([&] { load_run_directory(dir / "damaged", ParamConvention::kTotal); }, "line 2 is not a JSON");
  test::write_text(dir / "diverged" / "config.toml", kConfig);
  test::write_text(dir / "diverged" / "metrics.jsonl", "{\"eval_loss\": 3.2}\n{\"eval_loss\": null}\n");
  expect_data_error([&] { load_run_directory(dir / "diverged", ParamConvention::kTotal); }, "diverged");
  // Stopped before its end: the loss of step 20 is not the run's final one (it was fitted as if it were).
  test::write_text(dir / "stopped" / "config.toml", kConfig);
  std::string stopped = kMetrics;
  test::write_text(dir / "stopped" / "metrics.jsonl", stopped.substr(0, stopped.find("{\"step\": 30")));
  expect_data_error([&] { load_run_directory(dir / "stopped", ParamConvention::kTotal); },
                    "was last evaluated at step 20, but it trains 40 steps (train.steps): it was stopped before its "
                    "end");
  test::write_text(dir / "bad_model" / "config.toml", "[model]\nhidden_size = 64\nnum_attention_heads = 3\n");
  test::write_text(dir / "bad_model" / "metrics.jsonl", kMetrics);
  expect_data_error([&] { load_run_directory(dir / "bad_model", ParamConvention::kTotal); },
                    "not divisible by model.num_attention_heads");
}

TEST(SimFitData, LoadsDirectoriesOfRunsAndMixedInputs) {
  test::ScratchDir dir;
  for (const char* name : {"b", "a"}) {
    test::write_text(dir / "runs" / name / "config.toml", kConfig);
    test::write_text(dir / "runs" / name / "metrics.jsonl", kMetrics);
  }
  test::write_text(dir / "runs" / "notes" / "readme.txt", "not a run");
  test::write_text(dir / "extra.csv", "params,loss\n1e8,3\n");
  auto points = load_results({(dir / "runs").string(), (dir / "extra.csv").string()}, ParamConvention::kTotal);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_NE(points[0].source.find("runs/a"), std::string::npos);
  EXPECT_DOUBLE_EQ(points[2].params, 1e8);
  // A file or run named twice is read once (before: its points counted, and weighed, twice).
  points = load_results({(dir / "extra.csv").string(), (dir / "extra.csv").string(), (dir / "runs" / "a").string(),
                         (dir / "runs").string(), (dir / "runs" / "." / "b").string()},
                        ParamConvention::kTotal);
  EXPECT_EQ(points.size(), 3u);
  test::write_text(dir / "empty" / "readme.txt", "");
  expect_data_error([&] { load_results({(dir / "empty").string()}, ParamConvention::kTotal); }, "holds no loco runs");
  EXPECT_THROW(load_results({(dir / "absent").string()}, ParamConvention::kTotal), IoError);
}

}  // namespace
}  // namespace loco::sim
