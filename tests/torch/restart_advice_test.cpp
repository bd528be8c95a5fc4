// where_to_start_again (train/divergence.h): the checkpoint the advice after a failure names is one a resume can
// take: the latest whose parts in sight are whole, or, for a rank whose run directory is rank 0's on another
// host, rank 0's checkpoint of the latest step this rank wrote (audit round 12).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "loco/train/divergence.h"
#include "support/test_support.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

void write_part(const fs::path& dir, int step) {
  test::write_text(dir / "checkpoints" / ("step_" + std::to_string(step)) / "state.json", "{}");
}

TEST(RestartAdvice, TheLatestCheckpointWhosePartsInSightAreWholeIsNamed) {
  test::ScratchDir scratch;
  const fs::path run = scratch / "run";
  test::write_text(run / "config.toml", "");
  write_part(run, 2);
  write_part(run, 4);
  write_part(run / "replica_1", 2);  // replica 1 was killed while writing its part of step 4
  test::write_text(run / "replica_1" / "checkpoints" / ".step_4.partial-77" / "model.safetensors", "");
  EXPECT_EQ(where_to_start_again(run, run / "replica_1", std::nullopt),
            "resume from the last checkpoint, " + (run / "checkpoints" / "step_2").string());
  EXPECT_EQ(where_to_start_again(run, run, std::nullopt),
            "resume from the last checkpoint, " + (run / "checkpoints" / "step_2").string());
  // Rank 0 killed while writing its first part: nothing whole here, and its files are here (config.toml).
  const fs::path first = scratch / "first";
  test::write_text(first / "config.toml", "");
  write_part(first / "replica_1", 2);
  EXPECT_EQ(where_to_start_again(first, first / "replica_1", fs::path("/runs/x/checkpoints/step_0")),
            "resume from /runs/x/checkpoints/step_0 again");
  EXPECT_EQ(where_to_start_again(first, first / "replica_1", std::nullopt),
            "start the run again (it wrote no checkpoint yet)");
}

TEST(RestartAdvice, ARankOnAnotherHostNamesRankZerosCheckpointOfItsLatestStep) {
  test::ScratchDir scratch;
  const fs::path run = scratch / "run";  // this host's: rank 1's part only, no config.toml of rank 0's
  write_part(run / "replica_1", 50);
  write_part(run / "replica_1", 250);
  EXPECT_EQ(where_to_start_again(run, run / "replica_1", std::nullopt),
            "resume from the checkpoint of step 250 in rank 0's train.out_dir (" +
                (run / "checkpoints" / "step_250").string() + "), the latest this part wrote here (" +
                (run / "replica_1" / "checkpoints" / "step_250").string() + ")");
}

}  // namespace
}  // namespace loco
