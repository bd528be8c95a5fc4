// The warning `loco train` gives when an emulated link it waits out would make the run seem to hang
// (sim/slow_link_advice.h): one exchange, or one step's messages between stages, longer than an hour.
#include "loco/sim/slow_link_advice.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "loco/config/load_config.h"
#include "loco/sim/model_size.h"

namespace loco::sim {
namespace {

RunConfig two_replicas(const std::string& delay, const std::string& bandwidth_mbps) {
  RunConfig c;
  c.model.hidden_size = 48;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 4;
  c.model.vocab_size = 256;
  c.data.seq_len = 128;
  c.train.batch_size = 32;
  c.dist.algorithm = "diloco";
  c.dist.replicas = 2;
  c.comm.delay = delay;
  c.comm.bandwidth_mbps = bandwidth_mbps;
  resolve_derived(c);
  return c;
}

// The bandwidth at which a ring all-reduce of the model among 2 replicas, 2·n·32·(2−1)/2 = 32·n bits per rank,
// takes `seconds`.
std::string mbps_for(double seconds) {
  const double n = count_parameters(two_replicas("full", "").model, ParamConvention::kTotal, "test");
  return fmt::format("{:.17g}", 32 * n / seconds / 1e6);
}

TEST(SlowLinkAdvice, WarnsWhenAWaitedOutExchangeLastsHours) {
  const auto warning = slow_link_warning(two_replicas("full", mbps_for(2 * 3600)));
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("among 2 replicas takes about 2.0 hours"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("comm.delay = \"full\""), std::string::npos) << *warning;
  EXPECT_NE(warning->find("comm.delay = \"none\" counts the emulated time"), std::string::npos) << *warning;
  // Days, past two of them.
  const auto days = slow_link_warning(two_replicas("full", mbps_for(3 * 86400)));
  ASSERT_TRUE(days.has_value());
  EXPECT_NE(days->find("takes about 3 days"), std::string::npos) << *days;
  // The slowest rank's link decides.
  EXPECT_TRUE(slow_link_warning(two_replicas("full", "1000," + mbps_for(2 * 3600))).has_value());
}

TEST(SlowLinkAdvice, SaysNothingWhenTheLinkIsFastEnoughOrNotWaitedOut) {
  EXPECT_FALSE(slow_link_warning(two_replicas("full", mbps_for(0.8 * 3600))).has_value());
  EXPECT_FALSE(slow_link_warning(two_replicas("none", mbps_for(100 * 3600))).has_value());
  EXPECT_FALSE(slow_link_warning(two_replicas("latency", mbps_for(100 * 3600))).has_value());
  EXPECT_FALSE(slow_link_warning(two_replicas("full", "")).has_value());
  EXPECT_FALSE(slow_link_warning(two_replicas("full", "0")).has_value());  // 0: no limit
  RunConfig alone = two_replicas("full", mbps_for(100 * 3600));
  alone.dist.algorithm = "none";
  EXPECT_FALSE(slow_link_warning(alone).has_value());
}

// Two stages, micro-batches of 4 sequences of 128 tokens, hidden 48, 8 per step: each message is
// 32·4·128·48 = 786,432 bits, 16 a step over the slowest link; at 1 kbit/s that is 12,583 s = 3.5 hours.
TEST(SlowLinkAdvice, WarnsWhenAStepsMessagesBetweenStagesLastHours) {
  RunConfig c = two_replicas("none", "");
  c.dist.replicas = 1;
  c.dist.stages = 2;
  c.train.micro_batch_size = 4;
  c.pipeline.bandwidth_mbps = "1000,0.001";
  const auto warning = slow_link_warning(c);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("one step's activations and gradients between stages take about 3.5 hours at "
                          "pipeline.bandwidth_mbps = 1000,0.001"),
            std::string::npos)
      << *warning;
  c.pipeline.bandwidth_mbps = "0.01";  // 0.35 hours
  EXPECT_FALSE(slow_link_warning(c).has_value());
}

}  // namespace
}  // namespace loco::sim
