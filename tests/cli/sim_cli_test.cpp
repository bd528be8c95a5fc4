// `loco simulate` and `loco fit` as a user runs them: tables, JSON, charts, and one-paragraph
// errors with exit code 2 for bad options and 1 for unusable inputs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "support/test_support.h"

namespace loco::test {
namespace {

const std::string kFixture = std::string(LOCO_FIXTURE_DIR) + "/scaling_law_table.csv";

nlohmann::json parse_json(const CommandResult& r) {
  auto json = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_FALSE(json.is_discarded()) << r.output;
  return json;
}

bool is_png(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in && magic[1] == 'P' && magic[2] == 'N' && magic[3] == 'G';
}

// Output that cannot be written (a full disk behind stdout) is an error: the table or the help is what the
// command ran for (before: exit 0, the output lost).
TEST(SimCli, OutputThatCannotBeWrittenIsAnError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  ScratchDir dir;
  for (const std::string args : {"simulate --params 1e9 --layers 24 --step-time 0.1", "simulate --help"}) {
    const std::string command =
        "'" + std::string(LOCO_BINARY) + "' " + args + " > /dev/full 2> '" + (dir / "err").string() + "'";
    const int status = std::system(command.c_str());
    const std::string said = read_text(dir / "err");
    ASSERT_TRUE(WIFEXITED(status)) << args;
    EXPECT_EQ(WEXITSTATUS(status), 1) << args << ": " << said;
    EXPECT_NE(said.find("cannot write the output to standard output"), std::string::npos) << args << ": " << said;
    EXPECT_EQ(said.find("unexpected error"), std::string::npos) << said;
  }
}

TEST(SimCli, CalibrationReproducesThePublishedTable) {
  auto r = run_loco({"simulate", "--calibrate", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = parse_json(r);
  EXPECT_EQ(json["rows"].size(), 5u);
  EXPECT_LE(json["worst_relative_error"].get<double>(), 0.15);
}

TEST(SimCli, SimulatesAndInvertsWithBothTimingModels) {
  auto r = run_loco({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--bandwidth", "10",
                     "--algorithms", "dp,streaming:tau=1", "--targets", "90", "--model", "both", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = parse_json(r);
  ASSERT_EQ(json["results"].size(), 4u);
  for (const auto& result : json["results"]) {
    EXPECT_GT(result["utilisation"].get<double>(), 0);
    EXPECT_GT(result["bandwidth_needed"][0]["bandwidth_gbps"].get<double>(), 0);
  }
  // Streaming with overlap needs far less than data parallel.
  EXPECT_LT(json["results"][1]["bandwidth_needed"][0]["bandwidth_gbps"].get<double>(),
            json["results"][0]["bandwidth_needed"][0]["bandwidth_gbps"].get<double>() / 10);
}

TEST(SimCli, ModelFromAConfigAndStepTimeFromTheBatch) {
  ScratchDir dir;
  write_text(dir / "run.toml",
             "[model]\nhidden_size = 2048\nnum_hidden_layers = 24\nnum_attention_heads = 16\n"
             "vocab_size = 32000\n[train]\nbatch_size = 256\n");
  auto r = run_loco({"simulate", "--config", (dir / "run.toml").string(), "--batch-tokens", "262144", "--workers", "64",
                     "--replicas", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = parse_json(r);
  EXPECT_EQ(json["scenario"]["layers"].get<int>(), 24);
  EXPECT_GT(json["scenario"]["params"].get<double>(), 1.3e9);
  EXPECT_GT(json["scenario"]["step_time_s"].get<double>(), 0);
}

TEST(SimCli, SweepWritesCsvAndPng) {
  ScratchDir dir;
  auto r = run_loco({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--algorithms", "dp,diloco",
                     "--sweep", (dir / "sweep").string(), "--sweep-points", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream csv(dir / "sweep" / "utilisation.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "bandwidth_gbps,\"dp\",\"diloco(H=100)\"");
  EXPECT_TRUE(is_png(dir / "sweep" / "utilisation.png"));
}

// The sweep's CSV, script and chart are not written into a data directory or a checkpoint (before: they were,
// with exit 0).
TEST(SimCli, ASweepIsNotWrittenIntoADataDirectory) {
  test::ScratchDir dir;
  test::write_text(dir / "data" / "meta.json", "{}");
  test::write_text(dir / "data" / "tokenizer.json", "{}");
  const auto r = test::run_loco({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--sweep",
                                 (dir / "data").string(), "--sweep-points", "3"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is a prepared data directory"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "data" / "utilisation.csv"));
}

TEST(SimCli, ImpossibleSimulationsAreClearErrors) {
  const std::vector<std::string> model = {"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = model;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_loco(args);
  };
  auto zero = with({"--bandwidth", "0"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.output.find("loco: error: the inter-replica bandwidth must lie between 1e-06 and 1e+09 Gbit/s"),
            std::string::npos)
      << zero.output;
  // Named as given: beyond the modelled links the times leave double's range (1e300 Gbit/s was "inf", a
  // subnormal bandwidth printed "-nan%" with exit 0).
  for (const auto& [flag, value, shown] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"--bandwidth", "1e300", "1e+300"},
                                                                      {"--bandwidth", "1e-320", "9.99989e-321"},
                                                                      {"--intra-bandwidth", "1e300", "1e+300"}}) {
    auto extreme = with({flag, value});
    EXPECT_EQ(extreme.exit_code, 2) << flag << " " << value;
    EXPECT_NE(extreme.output.find("(1 kbit/s to 1 Ebit/s; got " + shown + " Gbit/s)"), std::string::npos)
        << extreme.output;
  }
  ScratchDir sweep_dir;
  auto range = with({"--sweep", sweep_dir.path().string(), "--sweep-range", "1e-300,1"});
  EXPECT_EQ(range.exit_code, 2);
  EXPECT_NE(range.output.find("the sweep's lowest bandwidth must lie between"), std::string::npos) << range.output;
  auto points = with({"--sweep", sweep_dir.path().string(), "--sweep-points", "100000000"});
  EXPECT_EQ(points.exit_code, 2);
  EXPECT_NE(points.output.find("2 to 10000 points"), std::string::npos) << points.output;
  EXPECT_FALSE(std::filesystem::exists(sweep_dir / "utilisation.csv"));
  // Replays each within bounds, together hours (targets, and sweep points, multiply an H of 10^5's replay).
  auto targets = with({"--algorithms", "diloco:h=100000", "--targets", "10,20,30,40,50,60,70,80,90,95,99"});
  EXPECT_EQ(targets.exit_code, 2) << targets.output;
  EXPECT_NE(targets.output.find("finding the bandwidth of each target with the schedule model replays 2.14e+09 "
                                "layer-steps (1 algorithm(s), 297 replays each)"),
            std::string::npos)
      << targets.output;
  auto swept = with({"--algorithms", "diloco:h=100000", "--targets", "50", "--sweep", sweep_dir.path().string(),
                     "--sweep-points", "10000"});
  EXPECT_EQ(swept.exit_code, 2) << swept.output;
  EXPECT_NE(swept.output.find("the sweep with the schedule model replays 7.2e+10 layer-steps"), std::string::npos)
      << swept.output;
  EXPECT_FALSE(std::filesystem::exists(sweep_dir / "utilisation.csv"));
  auto replicas = with({"--replicas", "8", "--workers", "4"});
  EXPECT_EQ(replicas.exit_code, 2);
  EXPECT_NE(replicas.output.find("more replicas (8) than workers (4)"), std::string::npos) << replicas.output;
  auto no_model = run_loco({"simulate", "--step-time", "0.1"});
  EXPECT_EQ(no_model.exit_code, 2);
  EXPECT_NE(no_model.output.find("--params N --layers L"), std::string::npos) << no_model.output;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--tau", "-1"}, {"--h", "0"}, {"--fragment-layers", "0"}}) {
    auto negative = with({flag, value});
    EXPECT_EQ(negative.exit_code, 2) << flag;
    EXPECT_NE(negative.output.find(flag + ": " + value + " is not a whole number"), std::string::npos)
        << negative.output;
  }
  auto calibrate = with({"--calibrate"});
  EXPECT_EQ(calibrate.exit_code, 2);
  EXPECT_NE(calibrate.output.find("drop --params"), std::string::npos) << calibrate.output;
  // Options the calibration's fixed scenario would ignore, and options that refine one not given (before:
  // accepted, and nothing read them).
  const std::vector<std::pair<std::vector<std::string>, std::string>> ignored = {
      {{"simulate", "--calibrate", "--latency", "0.5"},
       "--calibrate runs the fixed scenario of the published "
       "table; drop --latency"},
      {{"simulate", "--calibrate", "--forward-share", "0.5", "--json"}, "drop --forward-share"},
      {{"simulate", "--params", "1e9", "--layers", "24", "--count", "non-embedding", "--step-time", "0.1"},
       "--count is read only with --config: give --config too, or drop --count"},
      {{"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--chip-flops", "1e15"},
       "--chip-flops is read only with --batch-tokens"},
      {{"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--sweep-points", "10"},
       "--sweep-points is read only with --sweep"},
      {{"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--sweep-range", "1,10"},
       "--sweep-range is read only with --sweep"}};
  for (const auto& [args, says] : ignored) {
    const auto result = run_loco(args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(says), std::string::npos) << result.output;
  }
}

TEST(SimCli, FitsThePublishedTable) {
  ScratchDir dir;
  auto r = run_loco({"fit", kFixture, "--predict", "10e9:8", "--predict", "10e9:dp", "--json", "--chart",
                     (dir / "fit.png").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = parse_json(r);
  EXPECT_NEAR(json["joint"]["parameters"]["A"].get<double>(), 19.226, 0.2);
  EXPECT_NEAR(json["joint"]["parameters"]["alpha"].get<double>(), -0.0985, 0.0005);
  EXPECT_NEAR(json["joint"]["parameters"]["beta"].get<double>(), 0.0116, 0.0005);
  ASSERT_EQ(json["predictions"].size(), 2u);
  EXPECT_GT(json["predictions"][0]["additive"].get<double>(), 1.5);
  EXPECT_TRUE(is_png(dir / "fit.png"));
}

TEST(SimCli, FitReadsRunDirectories) {
  ScratchDir dir;
  const double losses[] = {4.1, 3.7, 3.4};
  for (int i = 0; i < 3; ++i) {
    auto run = dir / "runs" / ("run" + std::to_string(i));
    write_text(run / "config.toml", "[model]\nhidden_size = " + std::to_string(64 << i) +
                                        "\nnum_hidden_layers = 2\nnum_attention_heads = 4\nvocab_size = 256\n");
    write_text(run / "metrics.jsonl",
               "{\"step\": 10, \"tokens\": 100, \"loss\": 5, \"eval_loss\": " + std::to_string(losses[i]) + "}\n");
  }
  auto r = run_loco({"fit", (dir / "runs").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = parse_json(r);
  EXPECT_EQ(json["points"].get<int>(), 3);
  EXPECT_LT(json["per_group"][0]["fit"]["parameters"]["alpha"].get<double>(), 0);
}

TEST(SimCli, ATableThatCannotBeCountedWithoutEmbeddingsIsSaid) {
  // Before: `--count non-embedding` fitted a table's total counts without a word.
  auto total_only = run_loco({"fit", kFixture, "--count", "non-embedding"});
  ASSERT_EQ(total_only.exit_code, 0) << total_only.output;
  EXPECT_NE(total_only.output.find("has no non_embedding_params column, so --count non-embedding cannot count its "
                                   "runs: its params column is N as it is"),
            std::string::npos)
      << total_only.output;
  ScratchDir dir;
  write_text(dir / "both.csv",
             "params,non_embedding_params,loss\n3e6,1e6,4.0\n3e7,1e7,3.5\n3e8,1e8,3.1\n3e9,1e9,2.8\n");
  auto both = run_loco({"fit", (dir / "both.csv").string(), "--count", "non-embedding"});
  ASSERT_EQ(both.exit_code, 0) << both.output;
  EXPECT_EQ(both.output.find("note:"), std::string::npos) << both.output;
  auto total = run_loco({"fit", kFixture});  // the default counts what the table holds: nothing to say
  ASSERT_EQ(total.exit_code, 0) << total.output;
  EXPECT_EQ(total.output.find("note:"), std::string::npos) << total.output;
}

TEST(SimCli, UnusableFitInputsAreClearErrors) {
  ScratchDir dir;
  auto missing = run_loco({"fit", (dir / "absent.csv").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("loco: error:"), std::string::npos) << missing.output;
  write_text(dir / "one.csv", "params,loss\n1e8,3.2\n");
  auto one = run_loco({"fit", (dir / "one.csv").string()});
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_NE(one.output.find("1 point for 2 parameters"), std::string::npos) << one.output;
  auto starts = run_loco({"fit", (dir / "one.csv").string(), "--starts", "100000000"});
  EXPECT_EQ(starts.exit_code, 2) << starts.output;
  EXPECT_NE(starts.output.find("--starts must be between 1 and 10000"), std::string::npos) << starts.output;
  // A chart is never written into a prepared data directory (nor a checkpoint).
  write_text(dir / "data/meta.json", "{}");
  write_text(dir / "data/tokenizer.json", "{}");
  auto chart = run_loco({"fit", (dir / "one.csv").string(), "--chart", (dir / "data/fit.png").string()});
  EXPECT_EQ(chart.exit_code, 2) << chart.output;
  EXPECT_NE(chart.output.find("is a prepared data directory"), std::string::npos) << chart.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "data/fit.png"));
  EXPECT_FALSE(std::filesystem::exists(dir / "data/fit.gp"));
  // A bare file name is a chart in the current directory (not "cannot use ''").
  auto bare = run_loco({"fit", (dir / "one.csv").string(), "--chart", "fit.png"});
  EXPECT_EQ(bare.output.find("cannot use"), std::string::npos) << bare.output;
  // A label that is not UTF-8 is printed with U+FFFD (was "unexpected error: [json.exception.type_error.316]").
  write_text(dir / "latin1.csv", "params,loss,algorithm\n1e6,3.1,\xff\xfe\n2e6,3,\xff\xfe\n4e6,2.5,\xff\xfe\n");
  auto latin1 = run_loco({"fit", (dir / "latin1.csv").string(), "--json"});
  EXPECT_EQ(latin1.exit_code, 0) << latin1.output;
  EXPECT_NE(latin1.output.find("\xef\xbf\xbd"), std::string::npos) << latin1.output;
  // A chart never replaces what is not a file (as root, --chart /dev/null replaced the device with a PNG).
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  auto device = run_loco({"fit", kFixture, "--chart", (dir / "fifo").string()});
  EXPECT_EQ(device.exit_code, 1) << device.output;
  EXPECT_NE(device.output.find("it is a FIFO, and loco writes only regular files"), std::string::npos)
      << device.output;
  EXPECT_TRUE(std::filesystem::is_fifo(dir / "fifo"));
  EXPECT_FALSE(std::filesystem::exists(dir / "fifo.gp"));
  // A spreadsheet's byte-order mark is not part of the first column's name; a NUL is named, not a cut message.
  write_text(dir / "bom.csv", "\xef\xbb\xbfparams,loss\n1e6,3.1\n2e6,3\n4e6,2.5\n");
  auto bom = run_loco({"fit", (dir / "bom.csv").string()});
  EXPECT_EQ(bom.exit_code, 0) << bom.output;
  write_text(dir / "nul.csv", std::string("params,loss\n1e6,3.1\n2e6,3\0\n4e6,2.5\n", 35));
  auto nul = run_loco({"fit", (dir / "nul.csv").string()});
  EXPECT_EQ(nul.exit_code, 1) << nul.output;
  EXPECT_NE(nul.output.find("nul.csv line 3 holds a NUL byte: it is not a text CSV"), std::string::npos) << nul.output;
  // A loss of 1e308 among losses of 3 printed A = inf and "nan%" with exit 0.
  write_text(dir / "huge.csv", "params,loss\n1e6,1e308\n2e6,3\n4e6,2.5\n");
  auto huge = run_loco({"fit", (dir / "huge.csv").string()});
  EXPECT_EQ(huge.exit_code, 1) << huge.output;
  EXPECT_NE(huge.output.find("beyond double precision"), std::string::npos) << huge.output;
  // Losses that fit a law whose errors overflow (printed as "inf%", exit 0).
  write_text(dir / "huge-all.csv", "params,loss\n1e6,1e300\n1e7,1e305\n1e8,1e308\n");
  auto overflow = run_loco({"fit", (dir / "huge-all.csv").string()});
  EXPECT_EQ(overflow.exit_code, 1) << overflow.output;
  EXPECT_NE(overflow.output.find("the fitted law gives inf at N = 1e+08"), std::string::npos) << overflow.output;
  // Hexadecimal numbers, and a column given twice (the first was taken, the other ignored), were accepted.
  write_text(dir / "hex.csv", "params,loss\n0x10,3\n0x100,2.5\n0x1000,2\n");
  auto hex = run_loco({"fit", (dir / "hex.csv").string()});
  EXPECT_EQ(hex.exit_code, 1) << hex.output;
  EXPECT_NE(hex.output.find("params '0x10' is not a positive finite decimal number"), std::string::npos) << hex.output;
  write_text(dir / "twice.csv", "params,n,loss\n1e6,1,3\n1e7,1,2.5\n1e8,1,2\n");
  auto twice = run_loco({"fit", (dir / "twice.csv").string()});
  EXPECT_EQ(twice.exit_code, 1) << twice.output;
  EXPECT_NE(twice.output.find("has two columns of the params: 'params' (column 1) and 'n' (column 2)"),
            std::string::npos)
      << twice.output;
  // A chart named like an input replaced the results with the PNG (or an input .gp with the script).
  const std::string results = test::read_text(kFixture);
  write_text(dir / "r.csv", results);
  write_text(dir / "r.gp", results);
  for (const char* chart : {"r.csv", "r.png"}) {
    const std::string input = (dir / (std::string(chart) == "r.csv" ? "r.csv" : "r.gp")).string();
    auto replaced = run_loco({"fit", input, "--chart", (dir / chart).string()});
    EXPECT_EQ(replaced.exit_code, 2) << replaced.output;
    EXPECT_NE(replaced.output.find(", which is the input " + input), std::string::npos) << replaced.output;
    EXPECT_EQ(test::read_text(input), results);
  }
}

}  // namespace
}  // namespace loco::test
