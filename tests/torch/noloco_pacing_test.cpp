// NoLoCo's pair exchange (algo/noloco.h group_mean) paced like every exchange (note "paced-exchange"):
// the same mean, bit for bit, and the same bytes, in more messages.
#include <gtest/gtest.h>

#include "loco/algo/noloco.h"
#include "loco/comm/local/local_group.h"

namespace loco {
namespace {

TEST(NolocoPacing, PairMeanIsTheSameInRounds) {
  for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
    struct Outcome {
      std::vector<torch::Tensor> means = std::vector<torch::Tensor>(4);
      std::vector<comm::CommStats> stats = std::vector<comm::CommStats>(4);
    };
    auto run = [&](const std::string& round_kib) {
      Outcome out;
      comm::GroupOptions options;
      options.round_size = comm::RoundSize::parse(round_kib, "test");
      comm::run_local_replicas(
          4,
          [&](comm::Group& group) {
            const auto r = static_cast<std::size_t>(group.rank());
            auto generator = at::detail::createCPUGenerator(5 + r);
            const auto mine = torch::randn({3, 3335}, generator, dtype);  // 10,005 values, not a multiple of a round
            const std::vector<int> members = group.rank() < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
            out.means[r] = group_mean(group, mine, members, comm::GroupWide::yes);
            out.stats[r] = group.stats();
          },
          options);
      return out;
    };
    const Outcome whole = run("off"), paced = run("1");
    for (std::size_t r = 0; r < 4; ++r) {
      EXPECT_TRUE(torch::equal(paced.means[r], whole.means[r])) << "rank " << r;
      EXPECT_EQ(paced.means[r].sizes(), torch::IntArrayRef({3, 3335}));
      EXPECT_EQ(paced.stats[r].bytes_sent, whole.stats[r].bytes_sent);
      EXPECT_EQ(whole.stats[r].operations, 2u);  // one send, one receive
      const std::int64_t bytes = 10005 * (dtype == torch::kFloat32 ? 4 : 8);
      EXPECT_EQ(paced.stats[r].operations, static_cast<std::uint64_t>(2 * ((bytes + 1023) / 1024)));
    }
  }
}

}  // namespace
}  // namespace loco
