// Every preset in configs/ is a valid config (a typo there would greet users with an error).
#include <gtest/gtest.h>

#include <filesystem>

#include "loco/config/load_config.h"

namespace loco {
namespace {

TEST(Presets, EveryPresetLoadsAndValidates) {
  int presets = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(LOCO_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    const RunConfig c = load_run_config(entry.path(), {});
    EXPECT_GT(c.train.steps, 0);
    EXPECT_EQ(c.model.hidden_size % c.model.num_attention_heads, 0);
    ++presets;
  }
  EXPECT_GE(presets, 5);
}

}  // namespace
}  // namespace loco
