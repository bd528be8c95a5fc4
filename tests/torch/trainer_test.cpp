#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "loco/data/token_dataset.h"
#include "loco/io/safetensors.h"
#include "loco/train/checkpoint.h"
#include "loco/train/evaluate.h"
#include "loco/train/progress.h"
#include "loco/train/trainer.h"
#include "loco/util/error.h"
#include "support/test_support.h"
#include "torch/tiny_run.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

std::vector<double> train(const RunConfig& config, std::optional<fs::path> resume = std::nullopt) {
  Trainer trainer(TrainOptions{config, resume, /*quiet=*/true});
  trainer.run();
  return trainer.step_losses();
}

using test::read_metrics;

TEST(Trainer, LossFallsAndRunDirectoryIsComplete) {
  ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "run", 30);
  config.optim.lr = 1e-2;
  const auto losses = train(config);
  ASSERT_EQ(losses.size(), 30u);
  EXPECT_LT(losses.back(), losses.front() - 1.0);  // bytes start at ln(258) ≈ 5.55
  const fs::path out = config.train.out_dir;
  EXPECT_TRUE(fs::exists(out / "config.toml"));
  EXPECT_TRUE(fs::exists(out / "checkpoints" / "step_30" / "state.json"));
  const auto lines = read_metrics(out);
  ASSERT_EQ(lines.size(), 30u);
  for (const char* field : {"step", "tokens", "loss", "lr", "tokens_per_s", "elapsed_s"}) {
    EXPECT_TRUE(lines.front().contains(field)) << field;
  }
  EXPECT_EQ(lines.back().at("tokens"), 30 * 4 * 16);
  EXPECT_TRUE(lines[3].contains("eval_loss"));   // eval_every = 4
  EXPECT_FALSE(lines[4].contains("eval_loss"));
}

TEST(Trainer, ResumeReproducesTheUninterruptedRunBitForBit) {
  ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "full", 12);
  config.train.checkpoint_every = 5;
  const auto full = train(config);

  RunConfig resumed_config = config;
  resumed_config.train.out_dir = (dir / "resumed").string();
  const auto resumed = train(resumed_config, dir / "full" / "checkpoints" / "step_5");
  ASSERT_EQ(resumed.size(), 7u);
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i], full[5 + i]) << "step " << 6 + i;  // exact, not approximate
  }
  const auto a = read_checkpoint(dir / "full" / "checkpoints" / "step_12");
  const auto b = read_checkpoint(dir / "resumed" / "checkpoints" / "step_12");
  for (const auto& [name, tensor] : a.model.tensors) EXPECT_TRUE(torch::equal(tensor, b.model.at(name))) << name;
}

TEST(Trainer, ResumeRefusesAnotherDataStream) {
  ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "full", 4);
  config.train.checkpoint_every = 2;
  train(config);
  RunConfig other = config;
  other.train.out_dir = (dir / "other").string();
  other.train.seed = 7;
  try {
    train(other, dir / "full" / "checkpoints" / "step_2");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.seed"), std::string::npos) << e.what();
  }
}

TEST(Trainer, GradientAccumulationEqualsOneLargeBatch) {
  ScratchDir dir;
  RunConfig one = test::tiny_run_config(dir.path(), "one", 3);
  one.train.micro_batch_size = 4;
  RunConfig two = one;
  two.train.out_dir = (dir / "two").string();
  two.train.micro_batch_size = 1;
  const auto a = train(one);
  const auto b = train(two);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
}

TEST(Trainer, RefusesToTrainOverAnotherRunsCheckpoints) {
  ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "run", 2);
  train(config);
  EXPECT_THROW(train(config), ConfigError);
  EXPECT_TRUE(fs::exists(dir / "run" / "checkpoints" / "step_2" / "state.json"));
  // Metrics alone (a run that died before its first checkpoint) are protected too.
  std::error_code ec;
  ASSERT_TRUE(remove_tree(dir / "run" / "checkpoints", ec)) << ec.message();
  EXPECT_THROW(train(config), ConfigError);
  EXPECT_GT(fs::file_size(dir / "run" / "metrics.jsonl"), 0u);
}

// A run whose last update left weights that are not finite (its loss, taken before the update, still was) ended
// with exit 0 and a checkpoint that eval, generate, export and --resume all refuse; mid-run, the later loss error
// then pointed at that checkpoint. Now the run stops before writing it, and the earlier checkpoints stand.
TEST(Trainer, WeightsThatAreNoLongerFiniteAreNeverCheckpointed) {
  ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "run", 4);
  config.train.checkpoint_every = 1;
  config.optim.warmup_steps = 0;
  config.optim.lr = 1e30;
  try {
    train(config);
    ADD_FAILURE() << "a diverged run ended without an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    // Step 2's loss, taken before its update, is still finite: the weights after it are not.
    EXPECT_NE(what.find("the weights are no longer finite after step 2"), std::string::npos) << what;
    EXPECT_NE(what.find("Lower optim.lr (now 1e+30)"), std::string::npos) << what;
  }
  const fs::path checkpoints = dir / "run" / "checkpoints";
  std::error_code none;
  for (auto it = fs::directory_iterator(checkpoints, none); !none && it != fs::directory_iterator(); ++it) {
    const SafetensorsContent weights = load_safetensors(it->path() / "model.safetensors");
    for (const auto& [name, tensor] : weights.tensors) {
      EXPECT_TRUE(tensor.isfinite().all().item<bool>()) << it->path() << " " << name;
    }
  }
}

TEST(Trainer, VocabularyMismatchIsAConfigError) {
  ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "run", 2);
  config.model.vocab_size = 100;  // the byte data uses 258 ids
  try {
    train(config);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary mismatch"), std::string::npos) << e.what();
    // No data of 100 ids can be prepared: no --vocab-size is suggested (prepare refuses one below 259).
    EXPECT_EQ(std::string(e.what()).find("--vocab-size"), std::string::npos) << e.what();
  }
}

// Durations as a run prints them, up to an emulated clock on a link of a few bits per second (which counts
// past what an integer of seconds holds: it printed a negative number of minutes).
TEST(FormatDuration, ReadsFromSecondsToAnyNumberOfHours) {
  EXPECT_EQ(format_duration(12.34), "12.3s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(4.04e301), "1.12e+298 h");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "inf h");
}

// `loco eval --batch-size` beyond the run's micro-batch reads more windows, not more at once: each batch's
// forward goes in pieces, and the mean over windows is the whole batches' (each piece weighs what it holds).
TEST(Evaluate, ABatchIsForwardedInPiecesWithTheSameMean) {
  ScratchDir dir;
  test::prepare_tiny_byte_data(dir.path());
  const auto val = data::TokenDataset::open(dir / "data", "val");
  std::vector<std::int64_t> forwarded;
  const BatchLoss mean_id = [&](const torch::Tensor& inputs, const torch::Tensor&) {
    forwarded.push_back(inputs.size(0));
    return inputs.to(torch::kFloat64).mean().item<double>();
  };
  const EvalResult whole = evaluate_batches(mean_id, val, 2, 6, 8, torch::kCPU);
  EXPECT_EQ(forwarded, (std::vector<std::int64_t>{6, 6}));
  forwarded.clear();
  const EvalResult pieces = evaluate_batches(mean_id, val, 2, 6, 8, torch::kCPU, /*most_per_forward=*/4);
  EXPECT_EQ(forwarded, (std::vector<std::int64_t>{4, 4, 4}));
  EXPECT_EQ(pieces.tokens, whole.tokens);
  EXPECT_EQ(whole.tokens, 12 * 8);
  EXPECT_NEAR(pieces.loss, whole.loss, 1e-12 * whole.loss);
}

}  // namespace
}  // namespace loco
