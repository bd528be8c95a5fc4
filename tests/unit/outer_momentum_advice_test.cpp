// The warning `loco train` gives for outer momentum 0.9 inside the box loco's fidelity study measured
// (sim/outer_momentum_advice.h), and its silence outside it.
#include "loco/sim/outer_momentum_advice.h"

#include <gtest/gtest.h>

#include "loco/config/load_config.h"

namespace loco::sim {
namespace {

// The fidelity study's batch-32 cell: size s (55,536 non-embedding parameters), 4,096 tokens per step,
// 328 steps, DiLoCo H = 30 (11 outer steps) at the papers' mu = 0.9.
RunConfig study_cell(const std::string& algorithm = "diloco") {
  RunConfig c;
  c.model.hidden_size = 48;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 4;
  c.data.seq_len = 128;
  c.train.batch_size = 32;
  c.train.steps = 328;
  c.dist.algorithm = algorithm;
  c.dist.replicas = 1;
  c.diloco.sync_every = 30;
  c.diloco.outer_momentum = 0.9;
  c.streaming.sync_every = 30;
  c.streaming.outer_momentum = 0.9;
  resolve_derived(c);
  return c;
}

TEST(OuterMomentumAdvice, WarnsInsideTheMeasuredBoxNamingTheKeyAndTheEvidence) {
  const auto warning = outer_momentum_warning(study_cell());
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("diloco.outer_momentum = 0.9"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("4096 tokens per step, 11 outer steps and 55536 non-embedding"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("docs/scaling-study.md"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("--set diloco.outer_momentum=0.5"), std::string::npos) << *warning;
  // Streaming DiLoCo is judged by its own section's momentum and H, not DiLoCo's.
  RunConfig streaming = study_cell("streaming");
  streaming.diloco.outer_momentum = 0.5;
  streaming.diloco.sync_every = 1;
  const auto warned = outer_momentum_warning(streaming);
  ASSERT_TRUE(warned.has_value());
  EXPECT_NE(warned->find("streaming.outer_momentum = 0.9 (outer_lr 0.4) with 4096 tokens per step, 11 outer steps"),
            std::string::npos)
      << *warned;
  streaming.streaming.outer_momentum = 0.5;
  streaming.diloco.outer_momentum = 0.9;
  EXPECT_FALSE(outer_momentum_warning(streaming).has_value());
}

TEST(OuterMomentumAdvice, SilentForOtherMomentaAndAlgorithms) {
  RunConfig c = study_cell();
  c.diloco.outer_momentum = 0.5;
  EXPECT_FALSE(outer_momentum_warning(c).has_value());
  c.diloco.outer_momentum = 0.95;  // above the measured 0.9 is no better
  EXPECT_TRUE(outer_momentum_warning(c).has_value());
  for (const char* other : {"none", "ddp", "localsgd", "noloco"}) {
    EXPECT_FALSE(outer_momentum_warning(study_cell(other)).has_value()) << other;
  }
}

TEST(OuterMomentumAdvice, SilentOutsideTheMeasuredBox) {
  RunConfig c = study_cell();
  c.train.batch_size = 256;  // 32,768 tokens per step: the largest measured
  c.train.steps = 41;
  c.diloco.sync_every = 4;
  EXPECT_TRUE(outer_momentum_warning(c).has_value());
  c.train.batch_size = 512;  // 65,536: unmeasured
  EXPECT_FALSE(outer_momentum_warning(c).has_value());

  c = study_cell();
  c.diloco.sync_every = 4;  // 82 outer steps: the most measured
  EXPECT_TRUE(outer_momentum_warning(c).has_value());
  c.diloco.sync_every = 3;  // 110
  EXPECT_FALSE(outer_momentum_warning(c).has_value());

  c = study_cell();
  c.diloco.sync_every = 66;  // 5 outer steps: the fewest measured
  EXPECT_TRUE(outer_momentum_warning(c).has_value());
  c.diloco.sync_every = 100;  // 4
  EXPECT_FALSE(outer_momentum_warning(c).has_value());

  c = study_cell();
  c.train.batch_size = 4;  // 512 tokens per step: below the smallest measured batch
  EXPECT_FALSE(outer_momentum_warning(c).has_value());

  c = study_cell();
  c.model.hidden_size = 32;  // 25K non-embedding parameters: below size s
  c.model.intermediate_size = 0;
  resolve_derived(c);
  EXPECT_FALSE(outer_momentum_warning(c).has_value());

  c = study_cell();
  c.model.hidden_size = 768;  // a 125M-class width: far larger than any model the study trained
  c.model.num_attention_heads = 12;
  c.model.intermediate_size = 0;
  resolve_derived(c);
  EXPECT_FALSE(outer_momentum_warning(c).has_value());
}

}  // namespace
}  // namespace loco::sim
