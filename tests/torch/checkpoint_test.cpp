#include "loco/train/checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "loco/model/weights.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"
#include "torch/tiny_run.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

struct Fixture {
  ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "run", 4);
  CheckpointState state;
  CheckpointTensors tensors;

  Fixture() {
    config.model.vocab_size = 258;
    state.step = 4;
    state.tokens = 256;
    state.optimizer_steps = 4;
    state.sampler = {{"epoch", 1}, {"cursor", 3}};
    tensors.model = {{"a", torch::arange(6, torch::kFloat32).reshape({2, 3})}, {"b", torch::ones({4}, torch::kFloat64)}};
    tensors.optimizer = {{"exp_avg/a", torch::full({2, 3}, 0.5)}};
  }
  fs::path write() { return write_checkpoint(dir / "ckpt", config, state, tensors, config.data.dir); }
};

void flip_byte(const fs::path& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x5a));
}

std::string checkpoint_error(const fs::path& dir) {
  try {
    read_checkpoint(dir);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, RoundTripsTensorsStateAndConfig) {
  Fixture f;
  const fs::path dir = f.write();
  EXPECT_EQ(dir.filename(), "step_4");
  const LoadedCheckpoint loaded = read_checkpoint(dir);
  EXPECT_EQ(loaded.state.step, 4);
  EXPECT_EQ(loaded.state.tokens, 256);
  EXPECT_EQ(loaded.state.sampler.at("cursor"), 3);
  EXPECT_EQ(loaded.config.model.vocab_size, 258);
  EXPECT_TRUE(torch::equal(loaded.model.at("a"), f.tensors.model[0].second));
  EXPECT_EQ(loaded.model.at("b").scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::equal(loaded.optimizer.at("exp_avg/a"), f.tensors.optimizer[0].second));
  EXPECT_TRUE(fs::exists(dir / "tokenizer.json"));  // self-contained for generate/export
  // Nothing but finished checkpoints is left behind.
  for (const auto& entry : fs::directory_iterator(f.dir / "ckpt")) EXPECT_EQ(entry.path().filename(), "step_4");
}

TEST(Checkpoint, NeverOverwritesAnExistingCheckpoint) {
  Fixture f;
  const fs::path dir = f.write();
  f.tensors.model[0].second.fill_(7);
  EXPECT_THROW(f.write(), CheckpointError);
  EXPECT_EQ(read_checkpoint(dir).model.at("a")[0][0].item<float>(), 0.0f);
}

TEST(Checkpoint, CorruptedFileIsDetectedByChecksum) {
  Fixture f;
  const fs::path dir = f.write();
  flip_byte(dir / "model.safetensors", static_cast<std::streamoff>(fs::file_size(dir / "model.safetensors") - 3));
  const std::string message = checkpoint_error(dir);
  EXPECT_NE(message.find("model.safetensors is corrupted or truncated"), std::string::npos) << message;
}

// A replica's or stage's part names the run's checkpoints to resume from, which --resume takes (it named the
// part's own directory, which --resume refuses as "the part of one replica").
TEST(Checkpoint, ACorruptedPartNamesTheRunsCheckpointsToResumeFrom) {
  Fixture f;
  for (const fs::path& holder : {f.dir / "run", f.dir / "run" / "replica_1"})
    fs::create_directories(holder / "checkpoints");
  const fs::path part = write_checkpoint(f.dir / "run" / "replica_1" / "stage_1" / "checkpoints", f.config, f.state,
                                         f.tensors, f.config.data.dir);
  flip_byte(part / "model.safetensors", 10);
  const std::string message = checkpoint_error(part);
  EXPECT_NE(message.find("Resume from an earlier checkpoint in " + (f.dir / "run" / "checkpoints").string()),
            std::string::npos)
      << message;
}

TEST(Checkpoint, TruncatedFileIsDetected) {
  Fixture f;
  const fs::path dir = f.write();
  fs::resize_file(dir / "optimizer.safetensors", 20);
  EXPECT_NE(checkpoint_error(dir).find("optimizer.safetensors"), std::string::npos);
}

TEST(Checkpoint, InferenceReadsOnlyTheModel) {
  Fixture f;
  const fs::path dir = f.write();
  fs::resize_file(dir / "optimizer.safetensors", 20);  // damaged, but inference does not need it
  const LoadedCheckpoint loaded = read_checkpoint(dir, CheckpointUse::inference);
  EXPECT_TRUE(torch::equal(loaded.model.at("a"), f.tensors.model[0].second));
  EXPECT_TRUE(loaded.optimizer.tensors.empty());
  EXPECT_THROW(read_checkpoint(dir, CheckpointUse::resume), CheckpointError);
}

TEST(Checkpoint, MissingStateFileIsNotACheckpoint) {
  Fixture f;
  const fs::path dir = f.write();
  fs::remove(dir / "state.json");
  EXPECT_NE(checkpoint_error(dir).find("not a loco checkpoint"), std::string::npos);
  fs::create_directories(f.dir / "empty");
  EXPECT_NE(checkpoint_error(f.dir / "empty").find("not a loco checkpoint"), std::string::npos);
}

// Audit round 14: a checkpoint that train.keep_checkpoints removed (or that was moved) is said to be gone, with
// the newest ones beside where it was (before: "is not a loco checkpoint (no state.json)").
TEST(Checkpoint, AGoneCheckpointIsNamedWithTheNewestBesideIt) {
  Fixture f;
  const fs::path checkpoints = f.dir / "run" / "checkpoints";
  for (const char* step : {"step_4", "step_10", "step_8", "step_6", ".step_12.partial-7"}) {
    fs::create_directories(checkpoints / step);
  }
  EXPECT_EQ(checkpoint_error(checkpoints / "step_2"),
            (checkpoints / "step_2").string() +
                " does not exist (a run with train.keep_checkpoints removes its older checkpoints as it writes new "
                "ones). Pass an existing checkpoint: " +
                checkpoints.string() + " holds step_10, step_8, step_6");
  EXPECT_NE(checkpoint_error(f.dir / "nowhere" / "step_2")
                .find("does not exist. Pass an existing checkpoint "
                      "(OUT_DIR/checkpoints/step_N)"),
            std::string::npos);
}

TEST(Checkpoint, GarbledStateFileIsReported) {
  Fixture f;
  const fs::path dir = f.write();
  test::write_text(dir / "state.json", "{\"format\": \"loco-checkpoint\", \"step\": ");
  EXPECT_NE(checkpoint_error(dir).find("corrupted"), std::string::npos);
}

TEST(Checkpoint, StateFileWithAMissingFieldIsReported) {
  Fixture f;
  const fs::path dir = f.write();
  auto doc = nlohmann::json::parse(read_file(dir / "state.json"));
  doc.erase("optimizer_steps");
  test::write_text(dir / "state.json", doc.dump());
  EXPECT_NE(checkpoint_error(dir).find("lacks a field"), std::string::npos) << checkpoint_error(dir);
}

TEST(Checkpoint, WrongShapeNamesTheTensor) {
  Fixture f;
  const LoadedCheckpoint loaded = read_checkpoint(f.write());
  ModelConfig c = f.config.model;
  c.vocab_size = 258;
  Llama model(c);
  try {
    load_model_weights(model, loaded.model);
    FAIL() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("model.embed_tokens.weight"), std::string::npos) << e.what();
  }
}

// step_N is read in one place; anything else in a checkpoints directory is not a checkpoint.
TEST(Checkpoint, StepNamesAreReadInOnePlace) {
  EXPECT_EQ(checkpoint_step(checkpoint_name(12)), 12);
  EXPECT_EQ(checkpoint_step("step_0"), 0);
  for (const char* other : {"step_", "step_x", "step_1a", "tep_1", "step_-1", ".step_3.partial-42", "step_ 3"}) {
    EXPECT_FALSE(checkpoint_step(other)) << other;
  }
  ScratchDir dir;
  for (const char* name : {"step_10", "step_9", "step_x", ".step_11.partial-1"}) fs::create_directories(dir / name);
  test::write_text(dir / "step_12", "a file, not a checkpoint");
  const auto found = list_checkpoints(dir.path());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].first, 9);
  EXPECT_EQ(found[1].first, 10);
  EXPECT_EQ(found[1].second, dir / "step_10");
  EXPECT_TRUE(list_checkpoints(dir / "absent").empty());
}

// The run directory a resume goes on in is the one its checkpoint lies in: a static run's, an elastic member's
// run (OUT/members/NAME/checkpoints/step_N), none for a checkpoint copied out of its run.
TEST(Checkpoint, TheRunDirectoryOfACheckpointIsWhereItLies) {
  EXPECT_EQ(run_directory_of("/r/x/checkpoints/step_4", false), fs::path("/r/x"));
  EXPECT_EQ(run_directory_of("/r/x/checkpoints/step_4/", false), fs::path("/r/x"));
  EXPECT_EQ(run_directory_of("/r/x/members/a-1/checkpoints/step_4", true), fs::path("/r/x"));
  EXPECT_EQ(run_directory_of("/r/x/checkpoints/step_4", true), std::nullopt);
  EXPECT_EQ(run_directory_of("/copied/step_4", false), std::nullopt);
  ScratchDir dir;  // a link beside the checkpoints is followed to the one it names
  fs::create_directories(dir / "run" / "checkpoints" / "step_2");
  fs::create_directory_symlink("step_2", dir / "run" / "checkpoints" / "latest");
  EXPECT_EQ(run_directory_of(dir / "run" / "checkpoints" / "latest", false), dir / "run");
}

}  // namespace
}  // namespace loco
