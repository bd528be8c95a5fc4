// Pipeline stages (docs/pipeline.md) against one process: a model split into parts computes the whole
// model's logits, and S = 2, 3, 4 stages as threads train the model one process trains, loss for loss.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "loco/algo/make_strategy.h"
#include "loco/comm/local/local_group.h"
#include "loco/config/load_config.h"
#include "loco/data/token_dataset.h"
#include "loco/model/weights.h"
#include "loco/pipeline/partition.h"
#include "loco/pipeline/stages/stage_runner.h"
#include "loco/train/checkpoint.h"
#include "loco/train/evaluate.h"
#include "loco/train/run_directory.h"
#include "loco/train/trainer.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"
#include "torch/tiny_run.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

ModelConfig four_layers(bool tied) {
  ModelConfig m;
  m.vocab_size = 40;
  m.hidden_size = 16;
  m.intermediate_size = 32;
  m.num_hidden_layers = 4;
  m.num_attention_heads = 2;
  m.num_key_value_heads = 2;
  m.max_position_embeddings = 8;
  m.tie_word_embeddings = tied;
  return m;
}

TEST(PipelineParts, HoldTheWholeModelsInitialValuesAndComputeItsLogits) {
  for (const bool tied : {false, true}) {
    const ModelConfig config = four_layers(tied);
    Llama whole(config);
    whole->init_weights(11);
    const auto split = pipeline::model_partition(config, 3, "1,2,1");
    std::vector<Llama> parts;
    for (int s = 0; s < 3; ++s) {
      parts.emplace_back(config, pipeline::stage_part(split, s));
      parts.back()->init_weights(11);
    }
    const NamedTensors whole_parameters = model_parameters(whole);
    const std::map<std::string, torch::Tensor> all(whole_parameters.begin(), whole_parameters.end());
    std::int64_t held = 0;
    for (const auto& part : parts) {
      for (const auto& [name, tensor] : model_parameters(part)) {
        ASSERT_TRUE(all.count(name)) << name;
        EXPECT_TRUE(torch::equal(tensor, all.at(name))) << name;
        held += tensor.numel();
      }
    }
    // Every parameter is held once, and the tied embedding twice (first and last stage).
    EXPECT_EQ(held, whole->num_parameters() + (tied ? config.vocab_size * config.hidden_size : 0));
    EXPECT_TRUE(parts[1]->model->embed_tokens.is_empty());
    EXPECT_EQ(parts[2]->model->embed_tokens.is_empty(), !tied);

    torch::NoGradGuard no_grad;
    const torch::Tensor ids = torch::randint(0, config.vocab_size, {2, 8}, torch::kInt64);
    torch::Tensor h = ids;
    for (auto& part : parts) h = part->forward(h);
    EXPECT_TRUE(torch::equal(h, whole->forward(ids))) << "tied " << tied;
  }
}

TEST(PipelineParts, ABalancedSplitCountsTheEmbeddingAndHeadOnTheEndStages) {
  ModelConfig config = four_layers(false);
  config.num_hidden_layers = 8;
  config.vocab_size = 4000;  // embedding and head are 64K parameters each; a layer ~3.1K
  const auto split = pipeline::model_partition(config, 2, "balanced");
  EXPECT_EQ(split, (std::vector<pipeline::StageLayers>{{0, 4}, {4, 4}}));
  const auto three = pipeline::model_partition(config, 3, "balanced");
  EXPECT_EQ(three[0].count + three[2].count, 2);  // the middle stage takes the layers the ends cannot
  EXPECT_EQ(three[1].count, 6);
  EXPECT_THROW(pipeline::model_partition(config, 3, "4,4"), ConfigError);
}

RunConfig pipeline_config(const fs::path& dir, const std::string& name, std::int64_t stages, bool tied,
                          const std::string& schedule) {
  RunConfig c = test::tiny_run_config(dir, name, 50);
  c.model.num_hidden_layers = 4;
  c.model.tie_word_embeddings = tied;
  c.train.batch_size = 8;
  c.train.micro_batch_size = 2;  // 4 micro-batches per step
  c.train.eval_every = 25;
  c.optim.lr = 1e-2;
  c.dist.stages = stages;
  c.pipeline.schedule = schedule;
  resolve_derived(c);
  validate(c);
  return c;
}

std::vector<double> step_losses(const RunConfig& config) {
  const fs::path out = config.train.out_dir;
  std::vector<double> losses;
  std::ifstream in(out / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) losses.push_back(nlohmann::json::parse(line).at("loss"));
  return losses;
}

// As `loco train` runs dist.backend = "local" (run/replica_runs.cpp, which the CLI tests run): R·S threads,
// or R replica threads without stages, or the one replica alone.
TrainSummary train(const RunConfig& config, std::optional<fs::path> resume = std::nullopt) {
  TrainOptions options{config, std::move(resume), /*quiet=*/true};
  options.make_strategy = make_strategy;
  const bool connected = config.dist.algorithm != "none";
  TrainSummary summary;
  std::mutex mutex;
  const auto keep = [&](const TrainSummary& s, bool first) {
    std::lock_guard lock(mutex);
    if (first) summary = s;
  };
  if (config.dist.stages > 1) {
    comm::run_local_pipelines(static_cast<int>(config.dist.replicas), static_cast<int>(config.dist.stages),
                              [&](comm::Group& pipeline, comm::Group& stage) {
                                TrainOptions mine = options;
                                mine.pipeline = &pipeline;
                                mine.group = connected ? &stage : nullptr;
                                keep(Trainer(mine).run(), pipeline.rank() == 0 && stage.rank() == 0);
                              },
                              {}, {});
  } else if (connected) {
    comm::run_local_replicas(static_cast<int>(config.dist.replicas), [&](comm::Group& group) {
      TrainOptions mine = options;
      mine.group = &group;
      keep(Trainer(mine).run(), group.rank() == 0);
    });
  } else {
    summary = Trainer(options).run();
  }
  return summary;
}

// What each stage's metrics.jsonl says of the pipeline: every message is a micro-batch's (2, 16, 32) fp32
// hidden states or gradients, 4096 bytes and the 8-byte size, 4 a step to each neighbour (the end stages have
// one neighbour, the middle ones two), and the evaluation at step 25 (2 batches of 8: 8 micro-batches) sent
// its hidden states forward; every stage after the first waits for its input before its first pass, so its
// bubble is above 0, and no stage waits a whole step.
void expect_stage_metrics(const RunConfig& config, int stages, const std::string& what) {
  for (int s = 0; s < stages; ++s) {
    std::ifstream in(stage_directory(config.train.out_dir, s) / "metrics.jsonl");
    std::vector<nlohmann::json> rows;
    for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(rows.size(), 50u) << what;
    const int neighbours = (s > 0) + (s + 1 < stages);
    const int evaluation_messages = s + 1 < stages ? 8 : 0;
    EXPECT_EQ(rows.back().at("activation_bytes").get<std::int64_t>(),
              (50 * 4 * neighbours + evaluation_messages) * (4096 + 8))
        << what << ", stage " << s;
    for (const auto& row : rows) {
      const double bubble = row.at("pipeline_bubble");
      EXPECT_LT(bubble, 1.0) << what << ", stage " << s;
      if (s > 0) {
        EXPECT_GT(bubble, 0.0) << what << ", stage " << s << ", step " << row.at("step");
      }
    }
  }
}

void expect_same_losses(const std::vector<double>& expected, const std::vector<double>& actual,
                        const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t k = 0; k < expected.size(); ++k) {
    // Float tolerance: the stages sum the same gradients in another order.
    EXPECT_NEAR(actual[k], expected[k], 2e-4 * std::abs(expected[k])) << what << ", step " << k + 1;
  }
}

TEST(PipelineStages, TrainTheModelOneProcessTrains) {
  ScratchDir dir;
  for (const bool tied : {false, true}) {
    const RunConfig one = pipeline_config(dir.path(), fmt::format("one_{}", tied), 1, tied, "1f1b");
    const TrainSummary reference = train(one);
    const std::vector<double> expected = step_losses(one);
    ASSERT_EQ(expected.size(), 50u);
    EXPECT_LT(expected.back(), expected.front() - 1.0);  // it learns: the comparison is not of noise
    for (const int stages : {2, 3, 4}) {
      for (const std::string schedule : {"1f1b", "fill-drain", "eager"}) {
        if (tied && schedule == "eager") continue;  // the order of passes does not touch the tied copies
        const std::string name = fmt::format("s{}_{}_{}", stages, schedule, tied);
        const RunConfig split = pipeline_config(dir.path(), name, stages, tied, schedule);
        const TrainSummary summary = train(split);
        expect_same_losses(expected, step_losses(split), name);
        EXPECT_NEAR(summary.eval.loss, reference.eval.loss, 2e-4 * reference.eval.loss) << name;
        // Every stage wrote its part; together they are the one process's model.
        const fs::path out = split.train.out_dir;
        const auto whole = read_checkpoint(fs::path(one.train.out_dir) / "checkpoints" / "step_50");
        std::set<std::string> seen;
        for (int s = 0; s < stages; ++s) {
          const auto part = read_checkpoint(stage_directory(out, s) / "checkpoints" / "step_50");
          for (const auto& [tensor_name, tensor] : part.model.tensors) {
            seen.insert(tensor_name);
            const torch::Tensor& expected_tensor = whole.model.at(tensor_name);
            const double difference = (tensor - expected_tensor).norm().item<double>();
            EXPECT_LT(difference, 1e-3 * expected_tensor.norm().item<double>()) << name << " " << tensor_name;
          }
        }
        EXPECT_EQ(seen.size(), whole.model.tensors.size()) << name;
        expect_stage_metrics(split, stages, name);
      }
    }
  }
}

// Every algorithm across 2 pipeline replicas trains as it does across 2 one-process replicas: each stage
// synchronises its own parameters with the same stage of the other replica. Streaming with 4 stages of a
// 4-layer model: stage 0 holds none of fragment 1's blocks (an empty fragment there).
TEST(PipelineStages, ComposeWithTheAlgorithmsAcrossReplicas) {
  ScratchDir dir;
  const std::vector<std::pair<std::string, int>> cases = {{"ddp", 2},    {"diloco", 2},   {"streaming", 4},
                                                          {"noloco", 2}, {"localsgd", 3}, {"sparseloco", 2}};
  for (const auto& [algorithm, stages] : cases) {
    std::vector<std::vector<double>> losses;
    for (const int s : {1, stages}) {
      RunConfig c = pipeline_config(dir.path(), fmt::format("{}_{}", algorithm, s), s, false, "1f1b");
      c.train.steps = 20;
      c.dist.algorithm = algorithm;
      c.dist.replicas = 2;
      c.diloco.sync_every = c.streaming.sync_every = c.noloco.sync_every = c.localsgd.sync_every = 5;
      c.sparseloco.sync_every = 5;
      c.streaming.fragments = 2;
      // fp32: a quantising codec scales blocks of a fragment's values in a row, and a stage's share of a
      // fragment is another row than the whole model's, so its rounding would differ (not its expectation).
      c.streaming.codec = "fp32";
      resolve_derived(c);
      validate(c);
      train(c);
      losses.push_back(step_losses(c));
      // Each replica's last stage wrote its part, and synchronised with the other replica's.
      if (s > 1) {
        EXPECT_TRUE(
            fs::exists(stage_directory(replica_directory(c.train.out_dir, 1), s - 1) / "checkpoints" / "step_20"))
            << algorithm;
      }
    }
    expect_same_losses(losses[0], losses[1], algorithm);
  }
}

TEST(PipelineStages, ResumeReproducesTheUninterruptedRunBitForBit) {
  ScratchDir dir;
  RunConfig full = pipeline_config(dir.path(), "full", 2, true, "1f1b");
  full.train.steps = 12;
  full.train.checkpoint_every = 5;
  resolve_derived(full);
  train(full);
  // Resumed with the split "balanced" gave written as its list of layers: the same split (it was refused).
  const auto balanced = pipeline::model_partition(full.model, 2, "balanced");
  RunConfig resumed = full;
  resumed.train.out_dir = (dir / "resumed").string();
  resumed.pipeline.partition = fmt::format("{},{}", balanced[0].count, balanced[1].count);
  RunConfig moved = resumed;  // another split: each stage's checkpoint holds another part of the model
  moved.train.out_dir = (dir / "moved").string();
  moved.pipeline.partition = fmt::format("{},{}", balanced[0].count + 1, balanced[1].count - 1);
  EXPECT_THROW(train(moved, dir / "full" / "checkpoints" / "step_5"), ConfigError);
  train(resumed, dir / "full" / "checkpoints" / "step_5");
  const auto a = step_losses(full);
  const auto b = step_losses(resumed);
  ASSERT_EQ(b.size(), 7u);
  for (std::size_t k = 0; k < b.size(); ++k) EXPECT_EQ(b[k], a[5 + k]) << "step " << 6 + k;
  for (const int s : {0, 1}) {
    const auto x = read_checkpoint(stage_directory(dir / "full", s) / "checkpoints" / "step_12");
    const auto y = read_checkpoint(stage_directory(dir / "resumed", s) / "checkpoints" / "step_12");
    for (const auto& [name, tensor] : x.model.tensors) EXPECT_TRUE(torch::equal(tensor, y.model.at(name))) << name;
  }
}

// pipeline.partition = "measured": stage 0 times a layer, the embedding and the head, and every stage takes
// the same split, which the run keeps: each stage's config.toml and checkpoints name it, and a resume that
// asks for "measured" again takes the checkpoint's split (a new measurement could differ) and continues
// the run bit for bit.
TEST(PipelineStages, AMeasuredPartitionIsOneSplitThatTheRunKeeps) {
  ScratchDir dir;
  RunConfig full = pipeline_config(dir.path(), "measured", 3, false, "1f1b");
  full.pipeline.partition = "measured";
  full.train.steps = 8;
  full.train.checkpoint_every = 4;
  full.train.eval_every = 0;
  full.dist.replicas = 2;  // replica 0 measures for both: twin stages hold the same layers
  full.dist.algorithm = "diloco";
  full.diloco.sync_every = 2;
  resolve_derived(full);
  train(full);
  std::string split;
  for (const int replica : {0, 1}) {
    for (int s = 0; s < 3; ++s) {
      const fs::path stage_dir = stage_directory(replica_directory(dir / "measured", replica), s);
      const RunConfig written = read_run_config(stage_dir / "config.toml", {});
      if (split.empty()) split = written.pipeline.partition;
      EXPECT_EQ(written.pipeline.partition, split) << "replica " << replica << ", stage " << s;
    }
  }
  const auto counts = pipeline::parse_partition(split, 4, 3);  // three blocks of at least one layer, adding up to 4
  EXPECT_EQ(counts.size(), 3u) << split;
  RunConfig resumed = full;
  resumed.train.out_dir = (dir / "resumed").string();
  train(resumed, dir / "measured" / "checkpoints" / "step_4");
  EXPECT_EQ(read_run_config(stage_directory(replica_directory(dir / "resumed", 1), 2) / "config.toml", {}).pipeline.partition,
            split);
  const auto a = step_losses(full), b = step_losses(resumed);
  ASSERT_EQ(b.size(), 4u);
  for (std::size_t k = 0; k < b.size(); ++k) EXPECT_EQ(b[k], a[4 + k]) << "step " << 5 + k;
}

TEST(PipelineStages, EvalGenerateAndExportReadTheStagesCheckpointsAsOneModel) {
  ScratchDir dir;
  RunConfig c = pipeline_config(dir.path(), "run", 3, true, "1f1b");
  c.train.steps = 3;
  resolve_derived(c);
  const TrainSummary summary = train(c);
  const fs::path first = dir / "run" / "checkpoints" / "step_3";
  const LoadedCheckpoint joined = read_checkpoint(first, CheckpointUse::inference);
  Llama model = restore_model(joined, torch::kCPU);  // refuses a model with a parameter missing
  EXPECT_EQ(joined.model.tensors.size(), model_parameters(model).size());
  // Named by any stage's checkpoint, the same model.
  const LoadedCheckpoint from_last = read_checkpoint(stage_checkpoint(first, 2), CheckpointUse::inference);
  for (const auto& [name, tensor] : joined.model.tensors) EXPECT_TRUE(torch::equal(tensor, from_last.model.at(name)));
  // Named with a trailing '/', through '.', or by a link beside the checkpoints, the same model (before: the other
  // stages' parts were looked for inside step_3/ or beside the link's name, and the whole run called incomplete).
  fs::create_directory_symlink("step_3", dir / "run" / "checkpoints" / "latest");
  for (const fs::path& named :
       {fs::path(first.string() + "/"), first / ".", dir / "run" / "checkpoints" / "." / "step_3",
        dir / "run" / "checkpoints" / "latest", fs::path(stage_checkpoint(first, 2).string() + "/")}) {
    const LoadedCheckpoint same = read_checkpoint(named, CheckpointUse::inference);
    for (const auto& [name, tensor] : joined.model.tensors)
      EXPECT_TRUE(torch::equal(tensor, same.model.at(name))) << named;
  }
  fs::remove(dir / "run" / "checkpoints" / "latest");
  // The whole model's loss on the evaluation windows is the one the stages computed together.
  const auto val = data::TokenDataset::open(c.data.dir, "val");
  const EvalResult eval = evaluate(model, val, c.train.eval_batches, c.train.batch_size, c.data.seq_len, torch::kCPU);
  EXPECT_NEAR(eval.loss, summary.eval.loss, 1e-5 * summary.eval.loss);

  // A stage's checkpoint missing, or a tied copy that differs from the other: refused, named.
  const fs::path last_model = stage_checkpoint(first, 2) / "model.safetensors";
  SafetensorsContent part = load_safetensors(last_model);
  NamedTensors edited(part.tensors.begin(), part.tensors.end());
  for (auto& [name, tensor] : edited) {
    if (name == "model.embed_tokens.weight") tensor = tensor + 1e-3;
  }
  // Written with a manifest that matches, as a careful tamperer would: only the copies' difference shows.
  const std::string bytes = encode_safetensors(edited, {{"format", "pt"}});
  write_file_atomic(last_model, bytes);
  const fs::path state_file = stage_checkpoint(first, 2) / "state.json";
  nlohmann::json state = nlohmann::json::parse(read_file(state_file));
  state["files"]["model.safetensors"] = {{"bytes", bytes.size()}, {"crc32", crc32_hex(bytes)}};
  write_file_atomic(state_file, state.dump(2));
  try {
    read_checkpoint(first, CheckpointUse::inference);
    FAIL() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("hold different values of model.embed_tokens.weight"), std::string::npos)
        << e.what();
  }
  fs::remove_all(stage_checkpoint(first, 2));
  EXPECT_THROW(read_checkpoint(first, CheckpointUse::inference), CheckpointError);
  try {
    read_checkpoint(first, CheckpointUse::inference);
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 2's checkpoint"), std::string::npos) << e.what();
  }
}

// A stage's part is known by what it holds (stage 0 holds the first layer), not by its path: a run of its own
// named stage_1 inside another pipeline run's directory is read as itself (before: as the outer run's stage 1,
// so eval, generate and export gave the outer run's model), and a stage's part copied away from its run is named
// as such (before: taken for stage 0, and a made-up path named as missing).
TEST(PipelineStages, AStagesPartIsKnownByTheLayersItHoldsNotByItsPath) {
  ScratchDir dir;
  RunConfig outer = pipeline_config(dir.path(), "outer", 2, false, "1f1b");
  outer.train.steps = 2;
  outer.train.eval_every = 0;
  train(outer);
  RunConfig inner = outer;  // a run of its own, in a directory named like a stage's
  inner.train.seed = outer.train.seed + 1;
  inner.train.out_dir = (dir / "outer" / "stage_7").string();
  train(inner);
  const fs::path inner_first = dir / "outer" / "stage_7" / "checkpoints" / "step_2";
  const LoadedCheckpoint read = read_checkpoint(inner_first, CheckpointUse::inference);
  const SafetensorsContent inner_stage0 = load_safetensors(inner_first / "model.safetensors");
  const std::string embedding = "model.embed_tokens.weight";
  EXPECT_TRUE(torch::equal(read.model.at(embedding), inner_stage0.tensors.at(embedding)));
  const LoadedCheckpoint outer_model =
      read_checkpoint(dir / "outer" / "checkpoints" / "step_2", CheckpointUse::inference);
  EXPECT_FALSE(torch::equal(read.model.at(embedding), outer_model.model.at(embedding)));
  EXPECT_EQ(read.model.tensors.size(), outer_model.model.tensors.size());

  // Stage 1's part alone, and stage 1's directory copied without the run around it.
  const fs::path part = stage_checkpoint(dir / "outer" / "checkpoints" / "step_2", 1);
  fs::create_directories(dir / "solo");
  fs::copy(part, dir / "solo" / "step_2", fs::copy_options::recursive);
  fs::create_directories(dir / "p3");
  fs::copy(dir / "outer" / "stage_1", dir / "p3" / "stage_1", fs::copy_options::recursive);
  const std::pair<fs::path, std::string> cases[] = {
      {dir / "solo" / "step_2", "is not beside it"},
      {dir / "p3" / "stage_1" / "checkpoints" / "step_2", "p3/checkpoints/step_2) is missing"},
  };
  for (const auto& [named, expected] : cases) {
    try {
      read_checkpoint(named, CheckpointUse::inference);
      FAIL() << named << " was read";
    } catch (const CheckpointError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("is a later stage's part of a pipeline checkpoint of 2 stages (it holds layer"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find(expected), std::string::npos) << message;
    }
  }
}

TEST(PipelineStages, StagesWithDifferentConfigsAreRefused) {
  ScratchDir dir;
  const RunConfig base = pipeline_config(dir.path(), "base", 2, false, "1f1b");
  try {
    comm::run_local_pipelines(1, 2,
                              [&](comm::Group& pipeline, comm::Group&) {
                                RunConfig mine = base;
                                mine.model.vocab_size =
                                    258;  // the byte vocabulary, as the trainer resolves it from the data
                                if (pipeline.rank() == 1) mine.train.micro_batch_size = 4;
                                resolve_derived(mine);
                                const auto split = pipeline::model_partition(mine.model, 2, "balanced");
                                Llama part(mine.model, pipeline::stage_part(split, pipeline.rank()));
                                pipeline::StageRunner runner(part, pipeline, mine);
                              },
                              {}, {});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("stage(s) 1 differ from stage 0"), std::string::npos) << e.what();
  }
}

TEST(PipelineStages, BadStageCountsAreConfigErrors) {
  ScratchDir dir;
  RunConfig c = test::tiny_run_config(dir.path(), "bad", 4);
  c.dist.stages = 3;  // 2 layers
  EXPECT_THROW(validate(c), ConfigError);
  c.dist.stages = 2;
  c.pipeline.partition = "2,1";
  c.model.num_hidden_layers = 2;
  EXPECT_THROW(train(c), ConfigError);
  c.pipeline.partition = "balanced";
  c.dist.algorithm = "diloco";
  c.dist.replicas = 2;
  c.dist.elastic = true;
  c.dist.batch = "per_replica";
  try {
    validate(c);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dist.stages > 1 with dist.elastic = true runs each stage as a member "
                                         "process"),
              std::string::npos)
        << e.what();
  }
  c.dist.backend = "gloo";  // elastic pipeline replicas are processes (tests/membership/runs: their churn)
  validate(c);
  c.pipeline.partition = "measured";
  try {
    validate(c);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("members would measure apart"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loco
