// Impossible simulator inputs give a ConfigError that names the problem and the option that fixes
// it; algorithm specs parse; parameter counts from a [model] section are exact.
#include <gtest/gtest.h>

#include <cmath>

#include "loco/config/load_config.h"
#include "loco/sim/algorithm_spec.h"
#include "loco/sim/bandwidth_search.h"
#include "loco/sim/model_size.h"
#include "loco/sim/schedule_sim.h"
#include "loco/util/error.h"
#include "support/test_support.h"

namespace loco::sim {
namespace {

Scenario valid_scenario() {
  Scenario s;
  s.params = 1e9;
  s.layers = 24;
  s.step_time_s = 0.1;
  s.workers = 2;
  s.replicas = 2;
  s.inter = {10e9, 0};
  s.intra = {400e9, 0};
  return s;
}

AlgorithmSpec spec(const std::string& text) { return parse_algorithm(text, AlgorithmDefaults{}, 24); }

// Runs `f`, expects a ConfigError whose message contains `needle`.
template <typename F>
void expect_config_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SimInputs, ImpossibleScenariosAreClearErrors) {
  auto run = [](Scenario s, const std::string& algorithm = "dp") {
    return [s, algorithm] { simulate_schedule(s, spec(algorithm)); };
  };
  Scenario s = valid_scenario();
  s.inter.bandwidth_bps = 0;
  expect_config_error(run(s), "--bandwidth");
  s = valid_scenario();
  s.replicas = 4;
  expect_config_error(run(s), "more replicas (4) than workers (2)");
  s = valid_scenario();
  s.workers = 5;
  expect_config_error(run(s), "multiple of --replicas");
  s = valid_scenario();
  s.params = NAN;
  expect_config_error(run(s), "parameter count");
  s = valid_scenario();
  s.step_time_s = 0;
  expect_config_error(run(s), "--step-time");
  s = valid_scenario();
  s.inter.latency_s = -1;
  expect_config_error(run(s), "--latency");
  s = valid_scenario();
  s.intra.bandwidth_bps = INFINITY;
  expect_config_error(run(s), "--intra-bandwidth");
  s = valid_scenario();
  s.replicas = 1;
  s.workers = 1;
  expect_config_error(run(s, "noloco"), "at least 2 replicas");
  expect_config_error([] { bandwidth_for_utilisation(valid_scenario(), spec("dp"), TimingModel::kSchedule, 1.0); },
                      "between 0% and 100%");
  s = valid_scenario();
  s.layers = 1000;
  expect_config_error(run(s, "diloco:h=10000"), "--model analytic");
}

TEST(SimInputs, ImpossibleAlgorithmsAreClearErrors) {
  const Scenario s = valid_scenario();
  expect_config_error([] { spec("localsgd"); }, "unknown algorithm 'localsgd'");
  expect_config_error([] { spec("diloco:eta=0.7"); }, "unknown key 'eta'");
  expect_config_error([] { spec("diloco:h"); }, "not key=value");
  expect_config_error([] { spec("diloco:h=1.5"); }, "whole number");
  expect_config_error([] { spec("streaming:bits=0"); }, "must be positive");
  expect_config_error([] { spec("diloco:fragments=4"); }, "only streaming");
  expect_config_error([] { spec("streaming:fragments=0"); }, "fragments=0 in algorithm 'streaming:fragments=0' must be at least 1");
  expect_config_error([&] { validate(spec("streaming:fragments=30"), s); }, "30 fragments for 24 layers");
  expect_config_error([&] { validate(spec("streaming:h=10:tau=10"), s); }, "must be smaller than H=10");
  expect_config_error([&] { validate(spec("dp:tau=1"), s); }, "no overlap");
  expect_config_error([&] { validate(spec("diloco:h=0"), s); }, "at least 1");
}

TEST(SimInputs, AlgorithmSpecsParseWithDefaults) {
  AlgorithmDefaults defaults{50, 4, 2, 0};
  AlgorithmSpec s = parse_algorithm("streaming", defaults, 24);
  EXPECT_EQ(s.kind, Algorithm::kStreaming);
  EXPECT_EQ(s.inner_steps, 50);
  EXPECT_EQ(s.fragments, 6);
  EXPECT_EQ(s.overlap_steps, 2);
  EXPECT_EQ(parse_algorithm("streaming:fragment_layers=5", defaults, 24).fragments, 5);  // ceil(24/5)
  EXPECT_EQ(parse_algorithm("diloco", defaults, 24).overlap_steps, 0);
  auto list = parse_algorithms("ddp,diloco:h=30:bits=4,noloco", defaults, 24);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].label(), "dp");
  EXPECT_EQ(list[1].label(), "diloco(H=30,bits=4)");
  EXPECT_EQ(list[2].label(), "noloco(H=50)");
  EXPECT_EQ(parse_algorithm("streaming:tau=1", AlgorithmDefaults{}, 24).label(), "streaming(H=100,P=8,tau=1)");
}

TEST(SimInputs, StridedFragmentsSyncAtEvenlySpreadSteps) {
  AlgorithmSpec s = parse_algorithm("streaming:h=100:fragments=8", AlgorithmDefaults{}, 24);
  EXPECT_EQ(fragment_of_layer(s, 0), 0);
  EXPECT_EQ(fragment_of_layer(s, 9), 1);
  EXPECT_EQ(fragment_offset(s, 1), 12);
  EXPECT_TRUE(syncs_after_step(s, 1, 11));
  EXPECT_TRUE(syncs_after_step(s, 1, 111));
  EXPECT_FALSE(syncs_after_step(s, 1, 12));
  EXPECT_TRUE(syncs_after_step(s, 0, 99));
}

const char* kModelToml = R"(
[model]
hidden_size = 64
intermediate_size = 0
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
vocab_size = 256
tie_word_embeddings = false
rope_theta = 10000.0

[train]
batch_size = 8
)";

TEST(SimModelSize, CountsLlamaParametersFromTheModelSection) {
  test::ScratchDir dir;
  test::write_text(dir / "model.toml", kModelToml);
  const ModelConfig model = read_config_for_planning(dir / "model.toml").model;
  EXPECT_EQ(model.intermediate_size, 192);  // 32·ceil(8·64/3/32)
  // Per layer: q 64·64, k and v 64·32 each, o 64·64, MLP 3·64·192, two norms of 64.
  const double per_layer = 4096 + 2048 + 2048 + 4096 + 36864 + 128;
  const double body = 2 * per_layer + 64;
  EXPECT_DOUBLE_EQ(count_parameters(model, ParamConvention::kNonEmbedding, "model.toml"), body);
  EXPECT_DOUBLE_EQ(count_parameters(model, ParamConvention::kTotal, "model.toml"), body + 2 * 256 * 64);
  ModelConfig tied = model;
  tied.tie_word_embeddings = true;
  EXPECT_DOUBLE_EQ(count_parameters(tied, ParamConvention::kTotal, "model.toml"), body + 256 * 64);
}

// The planning tools read a model the way `loco train` does (config/): missing keys take train's
// defaults, and the errors are config/'s.
TEST(SimModelSize, ModelSectionsReadAsTrainingReadsThem) {
  test::ScratchDir dir;
  test::write_text(dir / "defaults.toml", "[model]\nhidden_size = 64\nnum_hidden_layers = 2\n");
  const ModelConfig model = read_config_for_planning(dir / "defaults.toml").model;
  EXPECT_EQ(model.num_attention_heads, ModelConfig{}.num_attention_heads);
  EXPECT_EQ(model.num_key_value_heads, model.num_attention_heads);
  const double per_layer = 4 * 64 * 64 + 3 * 64 * 192 + 2 * 64;
  EXPECT_DOUBLE_EQ(count_parameters(model, ParamConvention::kNonEmbedding, "defaults.toml"), 2 * per_layer + 64);
  expect_config_error([&] { count_parameters(model, ParamConvention::kTotal, "defaults.toml"); },
                      "model.vocab_size is 0");
  test::write_text(dir / "heads.toml",
                   "[model]\nhidden_size = 64\nnum_hidden_layers = 2\nnum_attention_heads = 3\nvocab_size = 9\n");
  expect_config_error([&] { read_config_for_planning(dir / "heads.toml"); }, "not divisible");
  test::write_text(dir / "type.toml",
                   "[model]\nhidden_size = \"big\"\nnum_hidden_layers = 2\nnum_attention_heads = 4\nvocab_size = 9\n");
  expect_config_error([&] { read_config_for_planning(dir / "type.toml"); }, "model.hidden_size");
  test::write_text(dir / "syntax.toml", "[model\nhidden_size = 64\n");
  expect_config_error([&] { read_config_for_planning(dir / "syntax.toml"); }, "cannot parse");
  expect_config_error([&] { read_config_for_planning(dir / "absent.toml"); }, "does not exist");
  expect_config_error([] { parse_param_convention("kaplan"); }, "non-embedding");
}

}  // namespace
}  // namespace loco::sim
