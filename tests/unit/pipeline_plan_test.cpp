// Pipeline stages' plan (src/loco/pipeline/): the order of each stage's passes, what that order costs
// (bubble, activations held), and which layers each stage holds. Hand-computed cases.
#include <gtest/gtest.h>

#include "loco/pipeline/partition.h"
#include "loco/pipeline/schedule.h"
#include "loco/util/error.h"

namespace loco::pipeline {
namespace {

constexpr Pass F = Pass::forward;
constexpr Pass B = Pass::backward;

TEST(PipelineSchedule, FillDrainRunsEveryForwardThenEveryBackwardLastFirst) {
  const std::vector<Action> expected = {{F, 0}, {F, 1}, {F, 2}, {B, 2}, {B, 1}, {B, 0}};
  for (int stage = 0; stage < 3; ++stage) EXPECT_EQ(stage_actions(Schedule::fill_drain, 3, stage, 3), expected);
}

TEST(PipelineSchedule, OneForwardOneBackwardFillsThenAlternatesThenDrains) {
  // 4 stages, 6 micro-batches: stage s fills with 3 − s forwards.
  EXPECT_EQ(stage_actions(Schedule::one_f_one_b, 4, 0, 6),
            (std::vector<Action>{{F, 0}, {F, 1}, {F, 2}, {F, 3}, {B, 0}, {F, 4}, {B, 1}, {F, 5}, {B, 2}, {B, 3},
                                 {B, 4}, {B, 5}}));
  EXPECT_EQ(stage_actions(Schedule::one_f_one_b, 4, 3, 6),
            (std::vector<Action>{{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2}, {F, 3}, {B, 3}, {F, 4}, {B, 4},
                                 {F, 5}, {B, 5}}));
  // Fewer micro-batches than the fill: every forward, then every backward in order.
  EXPECT_EQ(stage_actions(Schedule::one_f_one_b, 4, 0, 2), (std::vector<Action>{{F, 0}, {F, 1}, {B, 0}, {B, 1}}));
}

TEST(PipelineSchedule, EagerForwardsEverythingFirstWhileTheLastStageBackpropagatesEachAtOnce) {
  const std::vector<Action> early = {{F, 0}, {F, 1}, {F, 2}, {B, 0}, {B, 1}, {B, 2}};
  EXPECT_EQ(stage_actions(Schedule::eager, 3, 0, 3), early);
  EXPECT_EQ(stage_actions(Schedule::eager, 3, 1, 3), early);
  EXPECT_EQ(stage_actions(Schedule::eager, 3, 2, 3), (std::vector<Action>{{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2}}));
}

// A stage posts its step's gradient receives in its own backward order (StageRunner::post_receives), and
// the next stage sends them in its order: every schedule must give neighbouring stages the same order, and
// run each micro-batch's forward before its backward, once each.
TEST(PipelineSchedule, NeighbouringStagesRunTheirBackwardsInTheSameOrder) {
  const auto backward_order = [](const std::vector<Action>& actions) {
    std::vector<int> order;
    for (const Action& action : actions) {
      if (action.pass == B) order.push_back(action.micro_batch);
    }
    return order;
  };
  for (const Schedule schedule : {Schedule::fill_drain, Schedule::one_f_one_b, Schedule::eager}) {
    for (int stages = 2; stages <= 6; ++stages) {
      for (int m = 1; m <= 9; ++m) {
        for (int s = 0; s < stages; ++s) {
          const std::vector<Action> actions = stage_actions(schedule, stages, s, m);
          ASSERT_EQ(actions.size(), static_cast<std::size_t>(2 * m));
          std::vector<bool> forwarded(static_cast<std::size_t>(m), false);
          for (const Action& action : actions) {
            if (action.pass == F) forwarded[static_cast<std::size_t>(action.micro_batch)] = true;
            else EXPECT_TRUE(forwarded[static_cast<std::size_t>(action.micro_batch)]) << schedule_name(schedule);
          }
          if (s + 1 < stages) {
            EXPECT_EQ(backward_order(actions), backward_order(stage_actions(schedule, stages, s + 1, m)))
                << schedule_name(schedule) << ", " << stages << " stages, m = " << m << ", stage " << s;
          }
        }
      }
    }
  }
}

TEST(PipelineSchedule, OnALinkThatTakesLongEagerWaitsOnceForTheRoundTripAnd1F1BOncePerMicroBatch) {
  // 2 stages, 3 micro-batches, forward 1 s, backward 2 s, link 5 s. Eager: stage 0 forwards at 0-3; stage 1
  // runs F0 B0 at 6-9, F1 B1 at 9-12, F2 B2 at 12-15; the gradients reach stage 0 at 14, 17 and 20, its
  // backwards end at 16, 19, 22. 1F1B: stage 0 runs F0 F1, then waits for B0's gradient (14) before F2
  // (16-17), which stage 1 gets at 22 and sends back at 25: stage 0's B2 ends at 32.
  EXPECT_DOUBLE_EQ(simulate(Schedule::eager, 3, {1, 1}, {2, 2}, 5).makespan_s, 22);
  EXPECT_DOUBLE_EQ(simulate(Schedule::one_f_one_b, 3, {1, 1}, {2, 2}, 5).makespan_s, 32);
  // Eager holds every micro-batch on the stages before the last, as fill-drain does.
  EXPECT_EQ(simulate(Schedule::eager, 8, {1, 1, 1, 1}, {2, 2, 2, 2}, 0).peak_in_flight,
            (std::vector<int>{8, 8, 8, 1}));
}

TEST(PipelineSchedule, EqualStagesLeaveTheTextbookBubbleUnderEverySchedule) {
  // S = 4, m = 8, forward 1 s, backward 2 s, no link: makespan (m + S − 1)(f + b) = 33 s, each stage busy
  // m (f + b) = 24 s, bubble (S − 1) / (m + S − 1) = 3/11.
  for (const Schedule schedule : {Schedule::fill_drain, Schedule::one_f_one_b, Schedule::eager}) {
    const Timeline t = simulate(schedule, 8, {1, 1, 1, 1}, {2, 2, 2, 2}, 0);
    EXPECT_DOUBLE_EQ(t.makespan_s, 33) << schedule_name(schedule);
    EXPECT_DOUBLE_EQ(t.bubble, 3.0 / 11) << schedule_name(schedule);
    for (const double busy : t.busy_s) EXPECT_DOUBLE_EQ(busy, 24);
  }
  // One stage is no pipeline: no bubble.
  EXPECT_DOUBLE_EQ(simulate(Schedule::one_f_one_b, 5, {1}, {2}, 0).bubble, 0);
}

TEST(PipelineSchedule, OneForwardOneBackwardHoldsFewerActivations) {
  const Timeline gpipe = simulate(Schedule::fill_drain, 8, {1, 1, 1, 1}, {2, 2, 2, 2}, 0);
  const Timeline one_f_one_b = simulate(Schedule::one_f_one_b, 8, {1, 1, 1, 1}, {2, 2, 2, 2}, 0);
  EXPECT_EQ(gpipe.peak_in_flight, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(one_f_one_b.peak_in_flight, (std::vector<int>{4, 3, 2, 1}));
}

TEST(PipelineSchedule, TheLinkAndTheSlowestStageSetTheTime) {
  // 2 stages, 1 micro-batch, link 0.5 s: F0 on stage 0 (1 s), sent (0.5), F0 on stage 1 (1), B0 there (2),
  // sent back (0.5), B0 on stage 0 (2): 7 s, each stage busy 3 s.
  Timeline t = simulate(Schedule::fill_drain, 1, {1, 1}, {2, 2}, 0.5);
  EXPECT_DOUBLE_EQ(t.makespan_s, 7);
  EXPECT_DOUBLE_EQ(t.bubble, 1 - 6.0 / 14);
  // A stage twice as slow as the others paces the steady state: m large, bubble → 1 − mean/slowest.
  t = simulate(Schedule::one_f_one_b, 64, {1, 2, 1}, {2, 4, 2}, 0);
  EXPECT_NEAR(t.bubble, 1 - (3 + 6 + 3) / (3.0 * 6), 0.05);
}

TEST(PipelineSchedule, NamesAreParsedAndUnknownOnesRefused) {
  EXPECT_EQ(parse_schedule("fill-drain"), Schedule::fill_drain);
  EXPECT_EQ(parse_schedule("1f1b"), Schedule::one_f_one_b);
  EXPECT_EQ(parse_schedule("eager"), Schedule::eager);
  for (const Schedule schedule : {Schedule::fill_drain, Schedule::one_f_one_b, Schedule::eager}) {
    EXPECT_EQ(parse_schedule(schedule_name(schedule)), schedule);
  }
  try {
    parse_schedule("gpipe");
    FAIL() << "gpipe was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fill-drain"), std::string::npos) << e.what();
  }
}

TEST(PipelinePartition, BalancesTheCostliestStageWithTheEndsExtraWork) {
  // 8 equal layers over 4 stages: 2 each.
  EXPECT_EQ(balanced_partition(std::vector<double>(8, 1), 4, 0, 0),
            (std::vector<StageLayers>{{0, 2}, {2, 2}, {4, 2}, {6, 2}}));
  // The embedding (1 layer's worth) and the head (2 layers' worth) push layers to the middle stages: the
  // costliest stage costs 3 at best (1+1, 3, 3, 2+1; of the splits that reach it, the earliest boundaries).
  EXPECT_EQ(balanced_partition(std::vector<double>(8, 1), 4, 1, 2),
            (std::vector<StageLayers>{{0, 1}, {1, 3}, {4, 3}, {7, 1}}));
  // Unequal layers: 5, 1, 1, 1, 1, 1 over 2 stages: {5} | {1 x 5} (max 5), not {5, 1} | ... (max 6).
  EXPECT_EQ(balanced_partition({5, 1, 1, 1, 1, 1}, 2, 0, 0), (std::vector<StageLayers>{{0, 1}, {1, 5}}));
  EXPECT_EQ(balanced_partition({1, 1, 1}, 1, 7, 9), (std::vector<StageLayers>{{0, 3}}));
}

TEST(PipelinePartition, MoreStagesThanLayersIsRefused) {
  EXPECT_THROW(balanced_partition({1, 1}, 3, 0, 0), ConfigError);
  EXPECT_THROW(balanced_partition({1, 1}, 0, 0, 0), ConfigError);
}

TEST(PipelinePartition, AUsersSplitIsReadAndCheckedAgainstTheLayersAndStages) {
  EXPECT_EQ(parse_partition("3,4,4,3", 14, 4), (std::vector<StageLayers>{{0, 3}, {3, 4}, {7, 4}, {11, 3}}));
  for (const char* bad : {"3,4,4", "3,4,4,4", "3,4,,3", "3,4.5,3.5,3", "0,7,4,3", "a,b,c,d", "", "3,4,4,3,"}) {
    try {
      parse_partition(bad, 14, 4);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("pipeline.partition"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("e.g. '4,4,3,3'"), std::string::npos) << e.what();  // a split that fits
    }
  }
}

}  // namespace
}  // namespace loco::pipeline
