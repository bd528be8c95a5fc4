// Run configs (config/load_config.h): values read from TOML and --set through one parser, what is derived,
// and every value refused with the key and the fix.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "loco/comm/codecs/codec.h"
#include "loco/config/adversary.h"
#include "loco/config/algorithms.h"
#include "loco/config/config_keys.h"
#include "loco/config/load_config.h"
#include "loco/util/error.h"
#include "support/test_support.h"
#include "unit/config_text.h"

namespace loco {
namespace {

using test::config_error;
using test::kValidConfig;
using test::load_text;
using test::ScratchDir;
using test::write_text;

TEST(Config, ReadsValuesAndDerivesTheRest) {
  ScratchDir dir;
  RunConfig c = load_text(dir, kValidConfig);
  EXPECT_EQ(c.model.hidden_size, 96);
  EXPECT_EQ(c.model.num_key_value_heads, 2);
  EXPECT_EQ(c.model.intermediate_size, 256);  // 32·ceil(8·96/3/32) = 32·8
  EXPECT_EQ(c.model.max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-3);
  EXPECT_EQ(c.optim.schedule, "wsd");
  EXPECT_EQ(c.accumulation_steps(), 2);
  EXPECT_EQ(c.data.dir, "data/x");
}

TEST(Config, OverridesApplyInOrderWithTheKeyType) {
  ScratchDir dir;
  RunConfig c = load_text(dir, kValidConfig, {"optim.lr=2e-4", "train.steps=7", "model.tie_word_embeddings=true",
                                              "data.dir=elsewhere", "optim.lr=5e-4"});
  EXPECT_DOUBLE_EQ(c.optim.lr, 5e-4);
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_TRUE(c.model.tie_word_embeddings);
  EXPECT_EQ(c.data.dir, "elsewhere");
}

// A --set value that is not UTF-8 (a path in another encoding) is refused at once: the run's config.toml and
// checkpoints hold UTF-8 only, and the run failed after training, at its first checkpoint.
TEST(Config, AnOverrideThatIsNotUtf8IsRefused) {
  ScratchDir dir;
  try {
    load_text(dir, kValidConfig, {"train.out_dir=runs/o\xff"});
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set train.out_dir=runs/o…: byte 21 is not UTF-8"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(load_text(dir, kValidConfig, {"train.out_dir=runs/\xc3\xa9t\xc3\xa9"}).train.out_dir, "runs/\xc3\xa9t\xc3\xa9");
}

TEST(Config, TokenBudgetSetsSteps) {
  ScratchDir dir;
  RunConfig c = load_text(dir, kValidConfig, {"train.steps=0", "train.tokens=10000"});
  EXPECT_EQ(c.train.steps, 20);  // ceil(10000 / (8·64))
  EXPECT_NE(config_error(dir, kValidConfig, {"train.tokens=10000"}).find("disagree"), std::string::npos);
}

TEST(Config, UnknownKeyIsNamedWithASuggestion) {
  ScratchDir dir;
  std::string message = config_error(dir, std::string(kValidConfig) + "\n[optim2]\nx = 1\n");
  EXPECT_NE(message.find("unknown config key 'optim2.x'"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"optim.lrr=1"});
  EXPECT_NE(message.find("did you mean 'optim.lr'"), std::string::npos) << message;
}

TEST(Config, WrongTypesAreRejected) {
  ScratchDir dir;
  std::string message = config_error(dir, kValidConfig, {"train.steps=1.5"});
  EXPECT_NE(message.find("not an integer"), std::string::npos) << message;
  message = config_error(dir, "[train]\nsteps = \"ten\"\n");
  EXPECT_NE(message.find("train.steps"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"model.tie_word_embeddings=yes"});
  EXPECT_NE(message.find("true or false"), std::string::npos) << message;
}

// Finite numbers beyond float32's range would overflow when they become tensors (libtorch's error names no
// key): refused as config errors naming the key, for every float key, from a file or --set alike.
TEST(Config, NumbersBeyondFloat32AreRejectedByName) {
  ScratchDir dir;
  for (const std::string key : {"optim.lr", "optim.grad_clip", "model.rope_theta", "diloco.outer_lr", "noloco.gamma",
                                "streaming.outer_lr", "sparseloco.outer_lr"}) {
    for (const std::string value : {"1e300", "-4e38"}) {
      const std::string message = config_error(dir, kValidConfig, {key + "=" + value});
      EXPECT_NE(message.find(key + " = "), std::string::npos) << message;
      EXPECT_NE(message.find("beyond the range of float32"), std::string::npos) << key << "=" << value << ": " << message;
    }
  }
  EXPECT_EQ(config_error(dir, kValidConfig, {"model.rope_theta=3e38"}), "") << "float32's largest values stay valid";
  // optim.weight_decay is text ("1/T" or a number) whose number is checked the same: 1e39 was taken, and diverged.
  std::string message = config_error(dir, kValidConfig, {"optim.weight_decay=1e39"});
  EXPECT_NE(message.find("optim.weight_decay = 1e+39 is beyond the range of float32"), std::string::npos) << message;
  // Decimal only, as TOML writes floats: strtod also read 0x1p-8, which --set took (audit round 10).
  for (const std::string setting : {"optim.lr=0x1p-8", "optim.weight_decay=0x10", "optim.weight_decay=0X1P-3"}) {
    message = config_error(dir, kValidConfig, {setting});
    EXPECT_NE(message.find("is not a decimal number"), std::string::npos) << setting << ": " << message;
  }
  message = config_error(dir, kValidConfig, {"optim.weight_decay=1e-50"});
  EXPECT_NE(message.find("optim.weight_decay = 1e-50 is below the smallest float32 number"), std::string::npos)
      << message;
  // Below float32's least normal number a value is 0 there, or keeps no precision: optim.lr = 1e-50 trained
  // nothing, silently; rope_theta = 1e-300 ended in a NaN loss blamed on the lr.
  for (const std::string setting : {"optim.lr=1e-50", "model.rope_theta=1e-300", "optim.eps=1e-45"}) {
    const std::string message = config_error(dir, kValidConfig, {setting});
    EXPECT_NE(message.find("is below the smallest float32 number (1.18e-38)"), std::string::npos) << message;
  }
  EXPECT_EQ(config_error(dir, kValidConfig, {"optim.lr=2e-38", "optim.grad_clip=0"}), "")
      << "float32's least normal numbers and 0 stay valid";
}

// A micro-batch that no longer divides one replica's batch names the replica count, the likelier change (a
// resume with another dist.replicas), not only the micro-batch.
TEST(Config, AMicroBatchErrorNamesTheReplicasThatSplitTheBatch) {
  ScratchDir dir;
  const std::string message = config_error(dir, kValidConfig, {"dist.algorithm=diloco", "dist.replicas=4",
                                                               "train.batch_size=4", "train.micro_batch_size=2"});
  EXPECT_NE(message.find("one replica's batch (1: train.batch_size 4 over dist.replicas 4)"), std::string::npos)
      << message;
}

// Values that were accepted and then did something else: data parallel's bucket caps below 0 (the run logged
// "cap -1 MiB"; 0 is a bucket per parameter), and an adversary's factor beyond float32 (an infinity, which "nan"
// stands for).
TEST(Config, ValuesThatWereAcceptedButMeantNothingAreRefused) {
  ScratchDir dir;
  const std::vector<std::string> ddp = {"dist.algorithm=ddp", "dist.replicas=2"};
  for (const char* set : {"ddp.bucket_mb=-1", "ddp.first_bucket_mb=-0.5", "ddp.bucket_mb=1e9"}) {
    std::vector<std::string> sets = ddp;
    sets.push_back(set);
    EXPECT_NE(config_error(dir, kValidConfig, sets).find("must be a size in MiB from 0"), std::string::npos) << set;
  }
  EXPECT_EQ(config_error(dir, kValidConfig, {"dist.algorithm=ddp", "dist.replicas=2", "ddp.bucket_mb=0"}), "");
  EXPECT_NE(
      config_error(dir, kValidConfig, {"dist.algorithm=diloco", "dist.replicas=2", "dist.adversary=0@0:scale=1e39"})
          .find("the factor 1e39 is beyond float32's range"),
      std::string::npos);
  EXPECT_EQ(
      config_error(dir, kValidConfig, {"dist.algorithm=diloco", "dist.replicas=2", "dist.adversary=0@0:scale=1e38"}),
      "");
}

// train.keep_checkpoints: 0 keeps all; one kept is enough only where one process writes the run's checkpoints (each
// replica and stage writes its own, and a stop while they write leaves only the step before whole everywhere).
TEST(Config, CheckpointsKeptAreACountAndTwoWhereEachPartWritesItsOwn) {
  ScratchDir dir;
  EXPECT_EQ(config_error(dir, kValidConfig, {"train.keep_checkpoints=1"}), "");
  EXPECT_NE(config_error(dir, kValidConfig, {"train.keep_checkpoints=-1"})
                .find("train.keep_checkpoints must be 0 (keep every checkpoint) or positive"),
            std::string::npos);
  const std::string replicas =
      config_error(dir, kValidConfig, {"dist.algorithm=diloco", "dist.replicas=2", "train.keep_checkpoints=1"});
  EXPECT_NE(replicas.find("train.keep_checkpoints = 1 with dist.algorithm = \"diloco\": each replica and stage "
                          "writes its own checkpoints"),
            std::string::npos)
      << replicas;
  EXPECT_NE(config_error(dir, kValidConfig, {"dist.stages=2", "train.keep_checkpoints=1"}).find("Keep 2 or more"),
            std::string::npos);
  EXPECT_EQ(config_error(dir, kValidConfig, {"dist.algorithm=diloco", "dist.replicas=2", "train.keep_checkpoints=2"}),
            "");
}

// Counts whose work grows with them are bounded where more would only stall the run.
TEST(Config, CentredClippingIterationsAreBounded) {
  ScratchDir dir;
  const std::vector<std::string> clip = {"dist.algorithm=diloco", "dist.replicas=2", "dist.aggregation=centered_clip"};
  auto with = [&](const std::string& iterations) {
    std::vector<std::string> sets = clip;
    sets.push_back("dist.clip_iterations=" + iterations);
    return config_error(dir, kValidConfig, sets);
  };
  EXPECT_NE(with("2000000000").find("dist.clip_iterations (2000000000) must be between 1 and 1000"), std::string::npos)
      << with("2000000000");
  EXPECT_NE(with("0").find("must be between 1 and 1000"), std::string::npos);
  EXPECT_EQ(with("1000"), "");
}

// Note "one-number-parser": a TOML file and --set refuse the same numbers, with the same words.
TEST(Config, NumbersFromTomlAndSetGoThroughOneParser) {
  ScratchDir dir;
  auto with = [](const std::string& section_line, const std::string& line) {
    std::string text = kValidConfig;
    const auto at = text.find(section_line) + section_line.size();
    return text.insert(at, "\n" + line);
  };
  for (const char* value : {"inf", "+inf", "-inf", "nan", "1e999"}) {
    for (const char* key : {"grad_clip", "weight_decay", "eps"}) {
      const std::string from_file = config_error(dir, with("[optim]", fmt::format("{} = {}", key, value)));
      const std::string from_set = config_error(dir, kValidConfig, {fmt::format("optim.{}={}", key, value)});
      EXPECT_NE(from_file.find("is not a finite number"), std::string::npos) << key << " = " << value << ": " << from_file;
      EXPECT_NE(from_set.find("is not a finite number"), std::string::npos) << key << "=" << value << ": " << from_set;
    }
  }
  std::string infinite_lr = kValidConfig;
  infinite_lr.replace(infinite_lr.find("lr = 1e-3"), 9, "lr = inf");
  EXPECT_NE(config_error(dir, infinite_lr).find("'inf' for optim.lr"), std::string::npos) << config_error(dir, infinite_lr);
  for (const std::string line : {"rope_theta = inf", "rms_norm_eps = 1e999"}) {
    const std::string message = config_error(dir, with("[model]", line));
    EXPECT_NE(message.find("is not a finite number"), std::string::npos) << line << ": " << message;
  }
  std::string huge_steps = kValidConfig;
  huge_steps.replace(huge_steps.find("steps = 50"), 10, "steps = 99999999999999999999");
  std::string message = config_error(dir, huge_steps);
  EXPECT_NE(message.find("'99999999999999999999' for train.steps"), std::string::npos) << message;
  message = config_error(dir, std::string(kValidConfig) + "\n[diloco]\nsync_every = 99999999999999999999\n");
  EXPECT_NE(message.find("an integer of at most 64 bits"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"diloco.sync_every=99999999999999999999"});
  EXPECT_NE(message.find("an integer of at most 64 bits"), std::string::npos) << message;
  // TOML's other spellings of integers mean what they say, and the same through --set.
  const RunConfig config = load_text(dir, std::string(kValidConfig) + "\n[diloco]\nsync_every = 1_000\n", {"train.seed=0x10"});
  EXPECT_EQ(config.diloco.sync_every, 1000);
  EXPECT_EQ(config.train.seed, 16);
  EXPECT_EQ(load_text(dir, std::string(kValidConfig) + "\n[diloco]\nsync_every = 0o17\n").diloco.sync_every, 15);
  EXPECT_EQ(load_text(dir, kValidConfig, {"diloco.sync_every=0b101"}).diloco.sync_every, 5);
  EXPECT_NE(config_error(dir, kValidConfig, {"diloco.sync_every=0x-5"}).find("not an integer"), std::string::npos);
}

TEST(Config, NegativeTokensAndModelsNoMachineHoldsAreRefused) {
  ScratchDir dir;
  std::string message = config_error(dir, kValidConfig, {"train.tokens=-1"});
  EXPECT_NE(message.find("train.tokens (-1)"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"model.num_hidden_layers=1099511627776"});
  EXPECT_NE(message.find("more than 8796093022208 parameters"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"model.vocab_size=4611686018427387904"});
  EXPECT_NE(message.find("64 bits"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"model.max_position_embeddings=1099511627776"});
  EXPECT_NE(message.find("at most 16777216"), std::string::npos) << message;
  // The largest preset is far inside the bound.
  EXPECT_NO_THROW(load_text(dir, kValidConfig, {"model.hidden_size=8192", "model.num_attention_heads=64",
                                                "model.num_key_value_heads=8", "model.num_hidden_layers=80",
                                                "model.vocab_size=128256"}));
}

// Values that would run out of a machine's threads, hold a pipeline's messages for days or count an emulated
// clock past what it holds; a NUL, which would cut a path (and the message) short; the type named with its
// article.
TEST(Config, ThreadsLinksAndNulCharactersBeyondAnyMachineAreRefused) {
  ScratchDir dir;
  std::string message = config_error(dir, kValidConfig, {"train.threads=100000"});
  EXPECT_NE(message.find("at most 4096"), std::string::npos) << message;
  EXPECT_NO_THROW(load_text(dir, kValidConfig, {"train.threads=4096"}));
  const std::string pipeline = std::string(kValidConfig) + "[dist]\nstages = 2\n";
  message = config_error(dir, pipeline, {"pipeline.latency_ms=1e12"});
  EXPECT_NE(message.find("pipeline.latency_ms: 1000000000000 ms is more than a minute"), std::string::npos) << message;
  EXPECT_NO_THROW(load_text(dir, pipeline, {"pipeline.latency_ms=60000"}));
  const std::string replicas = std::string(kValidConfig) + "[dist]\nalgorithm = \"diloco\"\nreplicas = 2\n";
  message = config_error(dir, replicas, {"comm.bandwidth_mbps=1e-300"});
  EXPECT_NE(message.find("comm.bandwidth_mbps: 1e-300 Mbit/s is outside"), std::string::npos) << message;
  message = config_error(dir, replicas, {"comm.bandwidth_mbps=100,1e8"});
  EXPECT_NE(message.find("100000000 Mbit/s is outside"), std::string::npos) << message;
  EXPECT_NO_THROW(load_text(dir, replicas, {"comm.bandwidth_mbps=0,0.001"}));
  message = config_error(dir, replicas, {"comm.latency_ms=1,x"});
  EXPECT_NE(message.find("comm.bandwidth_mbps / comm.latency_ms: latency (ms) '1,x'"), std::string::npos) << message;
  message = config_error(dir, std::string(kValidConfig) + "[dist]\nbackend = \"lo\\u0000cal\"\n");
  EXPECT_NE(message.find("dist.backend ("), std::string::npos) << message;
  EXPECT_NE(message.find("holds a NUL character"), std::string::npos) << message;
  EXPECT_EQ(message.find('\0'), std::string::npos);
  message = config_error(dir, "[train]\nsteps = 1979-05-27\n");
  EXPECT_NE(message.find("must be an integer"), std::string::npos) << message;
}

// comm.round_kib is text ("auto", "off" or KiB); a TOML number for a text key is taken as its text.
TEST(Config, RoundKibTakesAutoOffOrANumber) {
  ScratchDir dir;
  EXPECT_EQ(load_text(dir, kValidConfig).comm.round_kib, "auto");
  RunConfig c = load_text(dir, std::string(kValidConfig) + "\n[comm]\nround_kib = 32\nbandwidth_mbps = 0.5\n");
  EXPECT_EQ(c.comm.round_kib, "32");
  EXPECT_EQ(c.comm.bandwidth_mbps, "0.5");
  EXPECT_EQ(load_text(dir, kValidConfig, {"comm.round_kib=off"}).comm.round_kib, "off");
  for (const char* bad : {"comm.round_kib=fast", "comm.round_kib=-4"}) {
    const std::string message = config_error(dir, kValidConfig, {bad});
    EXPECT_NE(message.find("comm.round_kib"), std::string::npos) << message;
    EXPECT_NE(message.find("auto"), std::string::npos) << message;
  }
}

// optim.weight_decay is a number or "1/T", one over the run's optimizer steps (the DiLoCo scaling-law recipe).
TEST(Config, WeightDecayTakesANumberOrOneOverTheSteps) {
  ScratchDir dir;
  EXPECT_DOUBLE_EQ(load_text(dir, kValidConfig).optim.resolved_weight_decay, 0.1);
  RunConfig c = load_text(dir, std::string(kValidConfig), {"optim.weight_decay=1/T"});
  EXPECT_EQ(c.optim.weight_decay, "1/T");
  EXPECT_DOUBLE_EQ(c.optim.resolved_weight_decay, 1.0 / 50);
  c = load_text(dir, std::string(kValidConfig), {"optim.weight_decay=1/T", "train.steps=0", "train.tokens=64000"});
  EXPECT_EQ(c.train.steps, 125);  // 64,000 tokens at 8 x 64 per step
  EXPECT_DOUBLE_EQ(c.optim.resolved_weight_decay, 1.0 / 125);
  std::string text = kValidConfig;
  text.insert(text.find("schedule"), "weight_decay = 0\n");
  EXPECT_DOUBLE_EQ(load_text(dir, text).optim.resolved_weight_decay, 0.0);
  for (const char* bad : {"optim.weight_decay=1/t", "optim.weight_decay=one", "optim.weight_decay=-0.1",
                          "optim.weight_decay="}) {
    const std::string message = config_error(dir, kValidConfig, {bad});
    EXPECT_NE(message.find("optim.weight_decay"), std::string::npos) << bad << ": " << message;
    EXPECT_EQ(message.find("internal"), std::string::npos) << bad << ": " << message;
  }
  EXPECT_NE(config_error(dir, kValidConfig, {"optim.weight_decay=one"}).find("1/T"), std::string::npos);
}

TEST(Config, OverlapAutoNeedsRoomForTau) {
  ScratchDir dir;
  EXPECT_FALSE(load_text(dir, kValidConfig).streaming.overlap_auto);
  EXPECT_TRUE(load_text(dir, kValidConfig, {"streaming.overlap_auto=true"}).streaming.overlap_auto);
  std::string message = config_error(dir, kValidConfig, {"streaming.overlap_auto=true", "streaming.sync_every=1",
                                                          "streaming.overlap=0"});
  EXPECT_NE(message.find("streaming.sync_every of 2 or more"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"streaming.overlap_auto=true", "dist.algorithm=streaming",
                                             "dist.elastic=true", "dist.replicas=2", "dist.batch=per_replica"});
  EXPECT_NE(message.find("streaming.overlap_auto"), std::string::npos) << message;
}

// More fragments than H: every fragment synchronised at the same step (spacing ⌊H/P⌋ = 0), DiLoCo with P
// buffers under Streaming's name.
TEST(Config, StreamingNeedsAStepForEachFragmentsSynchronisation) {
  ScratchDir dir;
  const std::vector<std::string> streaming = {"dist.algorithm=streaming", "dist.replicas=2", "streaming.overlap=0"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), streaming.begin(), streaming.end());
    return more;
  };
  EXPECT_EQ(load_text(dir, kValidConfig,
                      with({"streaming.sync_every=3", "streaming.fragments=2", "streaming.embeddings_fragment=true"}))
                .streaming.sync_every,
            3);
  const std::string message =
      config_error(dir, kValidConfig,
                   with({"streaming.sync_every=2", "streaming.fragments=2", "streaming.embeddings_fragment=true"}));
  EXPECT_NE(message.find("streaming.sync_every (2) is below the number of fragments (3, with the embeddings' own)"),
            std::string::npos)
      << message;
}

TEST(Config, ImpossibleShapesNameTheKeys) {
  ScratchDir dir;
  std::string message = config_error(dir, kValidConfig, {"model.num_attention_heads=5"});
  EXPECT_NE(message.find("not divisible by model.num_attention_heads"), std::string::npos) << message;
  // The head count suggested is one that works (before: 1 for a width of 1, then refused as an odd head size).
  message = config_error(dir, kValidConfig, {"model.hidden_size=1"});
  EXPECT_NE(message.find("model.hidden_size (1) is odd"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"model.hidden_size=12", "model.num_attention_heads=4"});
  EXPECT_NE(message.find("(for example 2)"), std::string::npos) << message;  // 12/4 = 3 is odd; 2 takes kv 2
  EXPECT_EQ(load_text(dir, kValidConfig, {"model.hidden_size=12", "model.num_attention_heads=2"}).model.head_dim(), 6);
  // ... and one the key/value heads still divide (40 wide, 8 heads, 4 key/value heads: 4 heads of 10, not 5 of 8),
  // or else a key/value head count too (12 wide, 4 heads of 3, 4 key/value heads: 3 heads of 4 take 1).
  message = config_error(dir, kValidConfig,
                         {"model.hidden_size=40", "model.num_attention_heads=8", "model.num_key_value_heads=4"});
  EXPECT_NE(message.find("(for example 4)"), std::string::npos) << message;
  message = config_error(dir, kValidConfig,
                         {"model.hidden_size=12", "model.num_attention_heads=4", "model.num_key_value_heads=4"});
  EXPECT_NE(message.find("(for example 3, with model.num_key_value_heads = 1)"), std::string::npos) << message;
  // Values that train a model that cannot learn, without a NaN to say so (before: exit 0, loss ln V throughout).
  for (const char* set : {"model.initializer_range=2147483648", "model.rms_norm_eps=2"}) {
    EXPECT_NE(config_error(dir, kValidConfig, {set}).find("must be at most 1"), std::string::npos) << set;
  }
  message = config_error(dir, kValidConfig, {"optim.lr=1e-3", "optim.weight_decay=1000"});
  EXPECT_NE(message.find("AdamW multiplies the weights by 1 − lr · weight_decay"), std::string::npos) << message;
  // An evaluation of more sequences than 64 bits count (before: it read none, and the run said the data had no
  // validation split).
  message = config_error(dir, kValidConfig, {"train.eval_batches=2305843009213693952"});
  EXPECT_NE(message.find("train.eval_batches · train.batch_size"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"model.num_key_value_heads=4"});
  EXPECT_NE(message.find("must divide model.num_attention_heads"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"train.micro_batch_size=3"});
  EXPECT_NE(message.find("train.micro_batch_size"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"optim.schedule=exp"});
  EXPECT_NE(message.find("optim.schedule 'exp' is unknown"), std::string::npos) << message;
  message = config_error(dir, kValidConfig, {"train.steps=0"});
  EXPECT_NE(message.find("train.steps or train.tokens"), std::string::npos) << message;
}

TEST(Config, BadTomlAndMissingFileAreConfigErrors) {
  ScratchDir dir;
  EXPECT_NE(config_error(dir, "[model\nhidden_size = 3").find("cannot parse"), std::string::npos);
  EXPECT_THROW(load_run_config(dir / "absent.toml", {}), ConfigError);
  EXPECT_THROW(load_run_config(dir.path(), {}), ConfigError);  // a directory
  EXPECT_NE(config_error(dir, "[[train]]\nsteps = 4\n")
                .find("[[train]] in " + (dir / "run.toml").string() +
                      " is an array of tables (double brackets); a loco "
                      "config has one table per section: write [train]"),
            std::string::npos);
  EXPECT_NE(config_error(dir, "steps = 4\n").find("'steps' in"), std::string::npos);
}

// toml11 reads past its buffer on a literal string holding invalid UTF-8 (found by the config fuzzer):
// such a file is refused before it is parsed, naming where.
TEST(Config, AConfigThatIsNotUtf8IsRefusedNamingWhere) {
  ScratchDir dir;
  const std::string error = config_error(dir, "[train]\nsteps = 10\nout_dir = 'runs/\xff\xfex'\n");
  EXPECT_NE(error.find("is not UTF-8: byte 17 of line 3 (0xff)"), std::string::npos) << error;
  EXPECT_EQ(load_text(dir, "[train]\nsteps = 10\nout_dir = 'runs/\xc3\xa9t\xc3\xa9'\n").train.out_dir, "runs/\xc3\xa9t\xc3\xa9");
}

// toml11 parses nested arrays by recursion: 20,000 '[' crashed loco (found by the config fuzzer). Such a
// file is refused before it is parsed.
TEST(Config, ArraysNestedTooDeeplyAreRefused) {
  ScratchDir dir;
  const std::string error = config_error(dir, "[train]\nsteps = 10\nx = " + std::string(10000, '[') + "\n");
  EXPECT_NE(error.find("nest more than 64 deep at byte 69 of line 3"), std::string::npos) << error;
}

// toml11's time grows with a line's length times the values on it: long lines and huge files are refused
// before it sees them; the same values over several lines are read.
TEST(Config, AFileTooLargeOrWithALineTooLongIsRefused) {
  ScratchDir dir;
  const std::string line(16384, 'x');  // the longest line allowed
  EXPECT_EQ(
      load_text(dir, std::string(kValidConfig) + "#" + line.substr(1) + "\n#" + line.substr(1) + "\n").train.steps,
      load_text(dir, kValidConfig).train.steps);
  std::string error = config_error(dir, "[train]\nsteps = 10\n\n# " + line + "\n");
  EXPECT_NE(error.find("line 4 is longer than 16384 bytes; break a long array over several lines"), std::string::npos)
      << error;
  error = config_error(dir, "[train]\nsteps = 10\n" + std::string(5 << 20, '\n'));
  EXPECT_NE(error.find("holds 5242899 bytes, more than the 4 MiB a config file may hold"), std::string::npos) << error;
}

TEST(Config, TomlAndJsonRoundTrip) {
  ScratchDir dir;
  RunConfig c = load_text(dir, kValidConfig,
                          {"optim.eps=1e-10", "model.rope_theta=500000", "data.dir=odd \"name\" \\ dir"});
  RunConfig again = load_text(dir, to_toml(c));
  EXPECT_EQ(to_json(again), to_json(c));
  EXPECT_EQ(to_json(from_json(to_json(c))), to_json(c));
  // Control characters are escaped: a newline given to train.out_dir made the run's config.toml unreadable.
  c.train.out_dir = "runs/a\nb\tc\x01" "d\x7F";
  again = load_text(dir, to_toml(c));
  EXPECT_EQ(again.train.out_dir, c.train.out_dir);
}

TEST(Config, EveryKeyIsDescribed) {
  const std::string text = describe_config_keys();
  for (const auto& key : config_keys()) {
    EXPECT_NE(text.find(key.dotted()), std::string::npos) << key.dotted();
    EXPECT_FALSE(key.help.empty()) << key.dotted();
  }
}

// Every string key with choices is checked against its choices, by the same rule and message.
TEST(Config, ChoicesComeFromTheKeyTable) {
  ScratchDir dir;
  for (const auto& key : config_keys()) {
    if (key.choices.empty()) continue;
    const std::string message = config_error(dir, kValidConfig, {key.dotted() + "=nonsense"});
    EXPECT_NE(message.find(key.dotted() + " 'nonsense' is unknown; choose " + key.choice_list()), std::string::npos)
        << message;
    for (const auto& choice : key.choices) EXPECT_NE(key.description().find(choice.name), std::string::npos);
  }
  EXPECT_EQ(find_config_key("dist", "batch")->choice_list(), "split or per_replica");
}

// dist.algorithm's choices, its help and the strategy factory's enum are one registry.
TEST(Config, AlgorithmNamesAreOneRegistry) {
  const ConfigKey& key = *find_config_key("dist", "algorithm");
  ASSERT_EQ(key.choices.size(), algorithm_registry().size());
  for (std::size_t i = 0; i < key.choices.size(); ++i) {
    const AlgorithmEntry& entry = algorithm_registry()[i];
    EXPECT_EQ(key.choices[i].name, entry.name);
    EXPECT_EQ(find_algorithm(entry.name), entry.algorithm);
    EXPECT_NE(describe_config_keys().find(entry.summary), std::string::npos) << entry.name;
  }
  EXPECT_FALSE(find_algorithm("diloko"));
  EXPECT_THROW(algorithm_named("diloko"), InternalError);
}

// The codec choices of the config are exactly the codecs comm builds.
TEST(Config, CodecChoicesAreTheCodecsCommBuilds) {
  for (const char* section : {"comm", "streaming"}) {
    std::vector<std::string> names;
    for (const auto& choice : find_config_key(section, "codec")->choices) names.push_back(choice.name);
    EXPECT_EQ(names, comm::codec_names()) << section;
  }
}

// Note "config-is-data": dist.replicas = 0 takes the world size the caller learned, never the
// environment's WORLD_SIZE.
TEST(Config, ReplicasFromTheCallerNotTheEnvironment) {
  ScratchDir dir;
  ::setenv("WORLD_SIZE", "6", 1);
  ::setenv("RANK", "0", 1);
  ::setenv("MASTER_ADDR", "localhost", 1);
  const std::string text = std::string(kValidConfig) + "\n[dist]\nalgorithm = \"diloco\"\nbackend = \"gloo\"\n";
  EXPECT_EQ(load_text(dir, text).dist.replicas, 1);
  write_text(dir / "run.toml", text);
  EXPECT_EQ(load_run_config(dir / "run.toml", {}, 2).dist.replicas, 2);
  EXPECT_EQ(load_run_config(dir / "run.toml", {"dist.backend=local"}, 2).dist.replicas, 1);
  RunConfig raw = read_run_config(dir / "run.toml", {});
  EXPECT_EQ(raw.dist.replicas, 0);  // read as written: nothing derived
  EXPECT_EQ(raw.model.intermediate_size, 0);
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  ::unsetenv("MASTER_ADDR");
}

}  // namespace
}  // namespace loco
