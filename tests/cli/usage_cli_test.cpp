// Usage errors as a user meets them (cli/usage.h, docs/errors.md "Usage errors"): exit 2 and one line
// that names the option and shows a valid command, before any work; --help still exits 0.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_support.h"

namespace loco {
namespace {

using test::run_loco;

void expect_usage_error(const std::vector<std::string>& args, const std::vector<std::string>& texts) {
  const auto r = run_loco(args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line:\n" << r.output;
  EXPECT_NE(r.output.find("loco: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("for example: loco "), std::string::npos) << r.output;
  EXPECT_LT(r.output.size(), 400u) << r.output;
  for (const auto& text : texts) EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
}

TEST(UsageCli, NumbersOutOfRangeNameTheOptionAndTheRule) {
  const std::vector<std::string> generate = {"generate", "--checkpoint", "nowhere", "--prompt", "The jury"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = generate;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_usage_error(with({"--tokens", "-5"}), {"--tokens", "-5 is not a whole number ≥ 1", "loco generate"});
  expect_usage_error(with({"--tokens", "ten"}), {"--tokens", "ten is not a whole number"});
  expect_usage_error(with({"--temperature", "nan"}), {"--temperature", "nan is not a number from 0 to 100"});
  expect_usage_error(with({"--top-k", "-1"}), {"--top-k", "≥ 0"});
  expect_usage_error({"eval", "--checkpoint", "x", "--data", "y", "--batches", "0"}, {"--batches", "≥ 1"});
  expect_usage_error({"simulate", "--params", "nan", "--layers", "24", "--step-time", "0.1"},
                     {"--params", "nan is not a finite number", "loco simulate"});
  expect_usage_error({"prepare", "--input", "x", "--out", "y", "--vocab-size", "-3"}, {"--vocab-size"});
  // Beyond the option's type: CLI11's "Could not convert" said as what it is.
  expect_usage_error({"simulate", "--params", "1e9", "--layers", "99999999999", "--step-time", "0.1"},
                     {"--layers 99999999999 is not a value it takes: a number beyond the range of its type"});
  // A port beyond 65535 was once taken modulo 65536 (70000 listened on 4464 while the banner said 70000).
  expect_usage_error({"coordinator", "--port", "70000"},
                     {"--port", "70000 is not a TCP port from 0 to 65535", "loco coordinator"});
  expect_usage_error({"coordinator", "--store-port", "65536"}, {"--store-port", "65536 is not a TCP port"});
  expect_usage_error({"coordinator", "--port", "-1"}, {"--port", "-1 is not a TCP port"});
  // Every number in decimal: CLI11 read 010 as octal 8 and 0x10 as 16 where loco's checks read 10 (--port 010
  // listened on 8), wrapped -1 into an unsigned seed, saturated 2^64 and took '' as 0.
  expect_usage_error({"coordinator", "--port", "010"}, {"--port", "010 begins with 0", "octal"});
  expect_usage_error({"eval", "--checkpoint", "x", "--data", "y", "--batches", "08"},
                     {"--batches", "08 begins with 0"});
  expect_usage_error({"launch", "--nproc", "0x10", "--", "true"}, {"--nproc", "0x10 is not a whole number written"});
  expect_usage_error({"launch", "--nproc", "0.7", "--", "true"}, {"--nproc", "0.7 is not a whole number written"});
  expect_usage_error({"launch", "--nproc", "+5", "--", "true"}, {"--nproc", "+5 is not a whole number written"});
  expect_usage_error({"fit", "a.csv", "--seed", "-1"}, {"--seed", "-1 is negative"});
  expect_usage_error({"fit", "a.csv", "--seed", "18446744073709551616"}, {"--seed", "beyond the numbers 64 bits hold"});
  expect_usage_error({"bench", "allreduce", "--warmup", ""}, {"--warmup", "the value is empty"});
  expect_usage_error({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0x1p-3"},
                     {"--step-time", "0x1p-3 is not"});
}

TEST(UsageCli, MissingAndUnknownOptionsAndCommands) {
  expect_usage_error({"generate", "--checkpoint", "x"}, {"--prompt is required", "loco generate --checkpoint"});
  expect_usage_error({"train", "--config", "x.toml", "--bogus"}, {"--bogus", "loco train --config"});
  expect_usage_error({"nosuchcommand"}, {"nosuchcommand"});
  // A subcommand's unknown word is named too (before: "A subcommand is required").
  expect_usage_error({"bench", "allgather"}, {"'allgather' is not a loco bench command; the commands are allreduce"});
  expect_usage_error({}, {"subcommand"});
  expect_usage_error({"bench", "allreduce", "--nproc"}, {"--nproc", "loco bench allreduce"});
  // An option of one value given twice (was CLI11's "At Most 1 required but received 2").
  expect_usage_error({"generate", "--checkpoint", "x", "--prompt", "a", "--prompt", "b"},
                     {"--prompt was given 2 times; it takes one value, so give it once", "loco generate --checkpoint"});
  // Words no option takes, in the order given (CLI11 listed them last first: "extra2 extra1").
  expect_usage_error({"eval", "--checkpoint", "x", "--data", "y", "extra1", "extra2"},
                     {"extra1 extra2 were not expected: loco eval takes no words outside its options"});
  expect_usage_error({"bench", "allreduce", "--sizes", "1MB", "4MB"},
                     {"4MB was not expected: loco bench allreduce takes no words", "needs quotes"});
}

// Options that another makes meaningless, or that read one not given, are refused before any work (audit round 11:
// each was accepted and ignored).
TEST(UsageCli, OptionsThatWouldBeIgnoredAreRefused) {
  expect_usage_error({"sweep", "s.toml", "--dry-run", "--tables-only"},
                     {"--dry-run and --tables-only do not go together"});
  expect_usage_error({"status", "--coordinator", "127.0.0.1:1", "--json", "--events", "3"},
                     {"--json and --events do not go together"});
  expect_usage_error({"coordinator", "--run-id", ""}, {"--run-id", "the value is empty"});
  expect_usage_error({"coordinator", "--host", ""}, {"--host", "the value is empty"});
  expect_usage_error({"coordinator", "--heartbeat-timeout-s", "1e300"},
                     {"--heartbeat-timeout-s", "1e300 is not a number from 0 to 1000000"});
  const auto refused = [](const std::vector<std::string>& args, const std::string& text) {
    const auto r = test::run_loco_within(60, args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
  };
  refused({"generate", "--checkpoint", "nowhere", "--prompt", "a", "--temperature", "0", "--top-k", "5"},
          "--top-k is read only when sampling, and --temperature 0 decodes greedily");
  refused({"generate", "--checkpoint", "nowhere", "--prompt", "a", "--temperature", "0", "--seed", "1"},
          "--seed is read only when sampling");
  refused({"bench", "allreduce", "--codec", "fp32,bf16", "--block-size", "64"},
          "--block-size sizes the scale blocks of int8, fp4 and int4, and --codec fp32,bf16 has none of them");
  refused({"bench", "allreduce", "--delay", "full"},
          "--delay full shows an emulated link in real time, and no "
          "--bandwidth-mbps or --latency-ms emulates one");
  refused({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--algorithms", "dp", "--h", "50"},
          "--h is a default for the diloco, streaming and noloco specs in --algorithms that leave h= out, and "
          "--algorithms dp holds none");
  refused({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--algorithms", "dp,diloco", "--tau",
           "1"},
          "--tau is a default for the streaming specs in --algorithms that leave tau= out");
  // Audit round 12: every spec gives its own (before: --h 30 was accepted and read by none).
  refused({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--algorithms",
           "dp,diloco:h=50,streaming:h=20", "--h", "30"},
          "--h is a default for the diloco, streaming and noloco specs in --algorithms that leave h= out, and "
          "--algorithms dp,diloco:h=50,streaming:h=20 holds none: drop --h, or leave h= out of a spec");
  refused({"simulate", "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--algorithms",
           "streaming:fragments=4", "--fragment-layers", "2"},
          "--fragment-layers is a default for the streaming specs in --algorithms that leave fragments= and "
          "fragment_layers= out");
  refused({"coordinator", "--min-replicas", "3", "--start-replicas", "2", "--secret-file", "/nonexistent/s"},
          "--start-replicas 2 is below --min-replicas 3");
}

TEST(UsageCli, HelpShowsAnExampleAndExitsZero) {
  const auto r = run_loco({"generate", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Example: loco generate --checkpoint"), std::string::npos) << r.output;
  const auto config = run_loco({"train", "--help-config"});
  EXPECT_EQ(config.exit_code, 0) << config.output;
  EXPECT_NE(config.output.find("[sparseloco] [pipeline] [comm]"), std::string::npos) << config.output;
  EXPECT_NE(config.output.find("streaming (Streaming DiLoCo"), std::string::npos) << config.output;
}

}  // namespace
}  // namespace loco
