// Note "member-settings" (membership/run_settings.h): the coordinator refuses a member whose settings
// differ from the run's members', naming the key; a run without members takes the next joiner's.
#include "loco/membership/run_settings.h"

#include <gtest/gtest.h>

#include "loco/membership/coordinator.h"
#include "loco/membership/wire.h"
#include "membership/rules/expect_refusal.h"

namespace loco::membership {
namespace {

const nlohmann::json kRun = {{"model", {{"hidden_size", 64}, {"num_hidden_layers", 2}}},
                             {"diloco", {{"sync_every", 4}, {"outer_lr", 0.7}}}};

nlohmann::json with(const char* section, const char* key, const nlohmann::json& value) {
  nlohmann::json settings = kRun;
  settings[section][key] = value;
  return settings;
}

TEST(RunSettings, TheFirstKeyThatDiffersIsNamed) {
  EXPECT_FALSE(settings_difference(kRun, kRun));
  EXPECT_EQ(settings_difference(with("model", "hidden_size", 32), kRun),
            "model.hidden_size = 32, but the run's members have 64");
  EXPECT_EQ(settings_difference(with("diloco", "outer_lr", "0.7"), kRun),
            "diloco.outer_lr = \"0.7\", but the run's members have 0.7");
  nlohmann::json fewer = kRun;
  fewer["diloco"].erase("sync_every");
  EXPECT_EQ(settings_difference(fewer, kRun), "no diloco.sync_every, where the run's members have 4");
  EXPECT_EQ(settings_difference(with("streaming", "fragments", 3), kRun),
            "streaming.fragments = 3, which the run's members do not have");
  // An empty section is no key: the same settings.
  nlohmann::json empty_section = kRun;
  empty_section["comm"] = nlohmann::json::object();
  EXPECT_FALSE(settings_difference(empty_section, kRun));
  // A member's text reaches the log cut and escaped.
  const auto long_line = settings_difference(with("model", "hidden_size", std::string(500, 'x') + "\n"), kRun);
  ASSERT_TRUE(long_line);
  EXPECT_LT(long_line->size(), 200u) << *long_line;
  EXPECT_EQ(long_line->find('\n'), std::string::npos) << *long_line;
}

TEST(RunSettings, AJoinsSettingsAreObjectsOfSections) {
  EXPECT_EQ(join_settings(nlohmann::json{{"name", "a"}}), nlohmann::json::object());
  EXPECT_EQ(join_settings(nlohmann::json{{"settings", kRun}}), kRun);
  for (const nlohmann::json& bad : {nlohmann::json(3), nlohmann::json{{"model", 64}}, nlohmann::json::array()}) {
    test::expect_refusal(
        [&] {
          join_settings(nlohmann::json{{"settings", bad}});
        },
        Refusal::malformed, "an object of sections");
  }
  // The MAC covers them: settings changed on the way sign another name.
  EXPECT_EQ(settings_digest(nlohmann::json::object()), "");
  EXPECT_EQ(settings_digest(kRun).size(), 64u);
  EXPECT_NE(settings_digest(kRun), settings_digest(with("model", "hidden_size", 32)));
  EXPECT_EQ(signed_join_name("a", PipelinePlace{}, ""), "a");
  EXPECT_EQ(signed_join_name("a", PipelinePlace{}, "ab12"), "a|settings:ab12");
}

TEST(RunSettings, AMemberWithOtherSettingsIsRefusedByTheCoordinator) {
  Coordinator c(CoordinatorOptions{{1, 0, 3, 5}, "run-1", 77, {}});
  const JoinReply a = c.join("run-1", "a", 0, {}, kRun);
  c.join("run-1", "b", 0, {}, kRun);
  test::expect_refusal([&] { c.join("run-1", "c", 0, {}, with("diloco", "sync_every", 8)); }, Refusal::malformed,
                       "member 'c' has diloco.sync_every = 8, but the run's members have 4: every member of a run "
                       "must be given the same config");
  // Once every member is gone, the next one sets the run's settings (a mistaken first member does not stay).
  c.leave({a.member_id, 77}, "done", 1);
  c.leave({"b#1", 77}, "done", 1);
  c.join("run-1", "c", 2, {}, with("diloco", "sync_every", 8));
  test::expect_refusal([&] { c.join("run-1", "d", 2, {}, kRun); }, Refusal::malformed,
                       "member 'd' has diloco.sync_every = 4, but the run's members have 8");
}

// Audit round 12: a coordinator started (again) with another --steps than its members' train.steps refuses their
// join naming its own option (before: they were refused later, each "claims step 235, which no member of this run
// reaches (0 to 100)"); without --steps nothing is checked.
TEST(RunSettings, ACoordinatorsStepsThatAreNotTheMembersAreNamed) {
  CoordinatorOptions options{{1, 0, 3, 5}, "run-1", 77, {}};
  options.run_steps = 100;
  Coordinator c(options);
  test::expect_refusal([&] { c.join("run-1", "a", 0, {}, with("train", "steps", 3000)); }, Refusal::malformed,
                       "member 'a' has train.steps = 3000, but this coordinator was started with --steps 100: start "
                       "the coordinator with --steps 3000");
  c.join("run-1", "b", 0, {}, with("train", "steps", 100));
  Coordinator unchecked(CoordinatorOptions{{1, 0, 3, 5}, "run-1", 77, {}});
  unchecked.join("run-1", "a", 0, {}, with("train", "steps", 3000));
}

}  // namespace
}  // namespace loco::membership
