// The dashboard's data (src/loco/monitor): a metrics line's point, a member's report checked, the bounded
// history that thins evenly, and run directories read as they grow.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "loco/monitor/metric_point.h"
#include "loco/monitor/metrics_history.h"
#include "loco/monitor/run_files.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"

namespace loco::monitor {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kLoss = metric_index("loss");
constexpr std::size_t kEvalLoss = metric_index("eval_loss");

MetricPoint point_at(std::int64_t step, double loss) {
  MetricPoint p;
  p.step = step;
  p.values.fill(std::numeric_limits<double>::quiet_NaN());
  p.values[kLoss] = loss;
  return p;
}

TEST(MetricPoint, TakesTheNamedNumbersOfAMetricsLine) {
  const auto p = point_from_record(nlohmann::json::parse(
      R"({"step": 40, "loss": 5.5, "tokens": 81920, "eval_loss": 5.75, "lr": 0.001, "comm_s": 0.25, "member": "a#1"})"));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->step, 40);
  EXPECT_EQ(p->values[kLoss], 5.5);
  EXPECT_EQ(p->values[kEvalLoss], 5.75);
  EXPECT_EQ(p->values[metric_index("tokens")], 81920);
  EXPECT_EQ(p->values[metric_index("comm_s")], 0.25);
  EXPECT_TRUE(std::isnan(p->values[metric_index("tokens_per_s")]));
  // As a member reports it: the same numbers by name, the absent ones left out.
  EXPECT_EQ(report_json(*p), nlohmann::json::parse(
                                 R"({"step": 40, "loss": 5.5, "tokens": 81920, "eval_loss": 5.75, "comm_s": 0.25})"));
  EXPECT_EQ(parse_report(report_json(*p)).values[kEvalLoss], 5.75);
}

TEST(MetricPoint, ALineWithoutAStepInRangeHasNoPoint) {
  EXPECT_FALSE(point_from_record(nlohmann::json::parse(R"({"loss": 1})")));
  EXPECT_FALSE(point_from_record(nlohmann::json::parse(R"({"step": -1})")));
  EXPECT_FALSE(point_from_record(nlohmann::json::parse(R"({"step": 1.5})")));
  EXPECT_FALSE(point_from_record(nlohmann::json::parse(R"({"step": 1099511627777})")));
  EXPECT_FALSE(point_from_record(nlohmann::json::parse(R"([1, 2])")));
  EXPECT_TRUE(point_from_record(nlohmann::json::parse(R"({"step": 1099511627776})")));
}

TEST(MetricPoint, AReportWithAWrongValueIsRefusedByName) {
  const auto refused = [](const char* text, const char* says) {
    try {
      parse_report(nlohmann::json::parse(text));
      ADD_FAILURE() << text << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(R"({"loss": 1})", "\"step\"");
  refused(R"({"step": "3"})", "\"step\"");
  refused(R"({"step": 3, "loss": "low"})", "\"loss\" is not a finite number");
  refused(R"({"step": 3, "tokens_per_s": null})", "\"tokens_per_s\"");
  refused(R"({"step": 3, "bytes_sent": [1]})", "\"bytes_sent\"");
  refused(R"("step")", "not a JSON object");
  // A field this version does not know is a newer member's: ignored.
  EXPECT_EQ(parse_report(nlohmann::json::parse(R"({"step": 3, "loss": 2, "future": "x"})")).values[kLoss], 2);
}

TEST(MetricsHistory, ReturnsOnlyThePointsAfterASequenceNumberInColumns) {
  MetricsHistory history;
  history.add("a", point_at(10, 5.0));
  history.add("b", point_at(10, 6.0));
  history.add("a", point_at(20, 4.0));
  const nlohmann::json all = history.since(0);
  EXPECT_EQ(all["seq"], 3);
  ASSERT_EQ(all["series"].size(), 2u);
  EXPECT_EQ(all["series"][0]["name"], "a");
  EXPECT_EQ(all["series"][0]["step"], nlohmann::json::parse("[10, 20]"));
  EXPECT_EQ(all["series"][0]["loss"], nlohmann::json::parse("[5.0, 4.0]"));
  EXPECT_EQ(all["series"][0]["eval_loss"], nlohmann::json::parse("[null, null]"));
  const nlohmann::json later = history.since(2);
  ASSERT_EQ(later["series"].size(), 1u);
  EXPECT_EQ(later["series"][0]["name"], "a");
  EXPECT_EQ(later["series"][0]["step"], nlohmann::json::parse("[20]"));
  EXPECT_EQ(history.since(3)["series"].size(), 0u);
  EXPECT_EQ(history.latest("a")->step, 20);
  EXPECT_FALSE(history.latest("c"));
}

// A long history comes in answers of at most max_points, oldest first; asking on from each answer's "seq"
// gets every point once.
TEST(MetricsHistory, ALongHistoryComesInPiecesOldestFirst) {
  MetricsHistory history;
  for (int step = 1; step <= 5; ++step) {
    history.add("a", point_at(step, 1.0));
    history.add("b", point_at(step * 10, 1.0));
  }
  const nlohmann::json first = history.since(0, 3);
  EXPECT_EQ(first["seq"], 3);
  EXPECT_TRUE(first["more"].get<bool>());
  EXPECT_EQ(first["series"][0]["step"], nlohmann::json::parse("[1, 2]"));
  EXPECT_EQ(first["series"][1]["step"], nlohmann::json::parse("[10]"));
  std::vector<std::int64_t> a_steps, b_steps;
  std::uint64_t after = 0;
  for (int answer = 0; answer < 10; ++answer) {
    const nlohmann::json piece = history.since(after, 3);
    for (const auto& s : piece["series"]) {
      auto& steps = s["name"] == "a" ? a_steps : b_steps;
      for (const auto& step : s["step"]) steps.push_back(step.get<std::int64_t>());
    }
    after = piece["seq"].get<std::uint64_t>();
    if (!piece["more"].get<bool>()) break;
  }
  EXPECT_EQ(after, 10u);
  EXPECT_EQ(a_steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(b_steps, (std::vector<std::int64_t>{10, 20, 30, 40, 50}));
  EXPECT_FALSE(history.since(0)["more"].get<bool>());
}

// 100 points into a capacity of 8: kept are every 16th given point (0, 16, …, 96) and the newest (99); the
// gaps are even, the newest is always there, and the count stays within capacity + 1.
TEST(MetricsHistory, AFullSeriesThinsEvenlyAndKeepsTheNewest) {
  MetricsHistory history(/*capacity=*/8, /*max_series=*/4);
  for (int i = 0; i < 100; ++i) {
    history.add("a", point_at(i, 1.0));
    ASSERT_LE(history.points("a"), 9u);
    EXPECT_EQ(history.latest("a")->step, i);
  }
  EXPECT_EQ(history.since(0)["series"][0]["step"], nlohmann::json::parse("[0, 16, 32, 48, 64, 80, 96, 99]"));
}

TEST(MetricsHistory, DropsTheSeriesUpdatedLongestAgoPastItsBound) {
  MetricsHistory history(/*capacity=*/4, /*max_series=*/2);
  history.add("a", point_at(1, 1));
  history.add("b", point_at(1, 1));
  history.add("a", point_at(2, 1));
  history.add("c", point_at(1, 1));  // b was updated longest ago
  EXPECT_EQ(history.series_count(), 2u);
  EXPECT_EQ(history.points("b"), 0u);
  EXPECT_EQ(history.points("a"), 2u);
}

// The documented bound (docs/dashboard.md): 64 members × 100K logged steps stay within 64 × 2,049 points.
TEST(MetricsHistory, SixtyFourMembersOfAHundredThousandStepsStayWithinTheDocumentedMemory) {
  MetricsHistory history;
  for (int step = 0; step < 100000; ++step) {
    for (int m = 0; m < 64; ++m) history.add("member-" + std::to_string(m), point_at(step, 1));
  }
  EXPECT_LE(history.points("member-0"), MetricsHistory::kDefaultCapacity + 1);
  EXPECT_LT(history.memory_bytes(), 16u << 20) << history.memory_bytes();
}

class RunFilesTest : public ::testing::Test {
 protected:
  void append(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::app) << text;
  }
  test::ScratchDir scratch_;
  const fs::path dir_ = scratch_.path();
};

TEST_F(RunFilesTest, ReadsLinesAsTheyGrowFromARunItsReplicasAndItsMembers) {
  RunFiles files({dir_});
  MetricsHistory history;
  files.poll(history);
  EXPECT_EQ(history.series_count(), 0u);  // nothing written yet
  append(dir_ / "metrics.jsonl", R"({"step": 10, "loss": 5.0, "elapsed_s": 1.5})" "\n" R"({"step": 20, "lo)");
  append(dir_ / "replica_1" / "metrics.jsonl", R"({"step": 10, "loss": 5.1, "elapsed_s": 1.6})" "\n");
  files.poll(history);
  EXPECT_EQ(history.points(dir_.string()), 1u);  // the torn line waits for its end
  EXPECT_EQ(history.points((dir_ / "replica_1").string()), 1u);
  append(dir_ / "metrics.jsonl", R"(ss": 4.0, "elapsed_s": 3.0, "quorum_id": 2, "membership_events": [{"kind": "heal", "detail": "from b#1"}]})" "\n");
  files.poll(history);
  const auto latest = history.latest(dir_.string());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 20);
  EXPECT_EQ(latest->values[kLoss], 4.0);
  EXPECT_EQ(latest->time_s, 3.0);  // a run directory's clock is its elapsed_s
  append(dir_ / "members" / "rank-0-1" / "metrics.jsonl", R"({"step": 5, "loss": 6.0})" "\n");
  append(dir_ / "checkpoints" / "step_10" / "state.json", "{}");
  files.poll(history);
  EXPECT_EQ(history.points((dir_ / "members" / "rank-0-1").string()), 1u);
  const nlohmann::json status = files.status(history);
  ASSERT_EQ(status["members"].size(), 3u);
  const auto run = std::find_if(status["members"].begin(), status["members"].end(),
                                [&](const nlohmann::json& m) { return m["name"] == dir_.string(); });
  ASSERT_NE(run, status["members"].end());
  EXPECT_EQ((*run)["step"], 20);
  EXPECT_EQ((*run)["quorum_id"], 2);
  EXPECT_GE((*run)["updated_age_s"].get<double>(), 0.0);  // written just now
  EXPECT_LT((*run)["updated_age_s"].get<double>(), 60.0);
  ASSERT_EQ(status["events"].size(), 1u);
  EXPECT_EQ(status["events"][0]["kind"], "heal");
}

TEST_F(RunFilesTest, AFileRewrittenByAResumeStartsItsSeriesAgain) {
  append(dir_ / "metrics.jsonl", R"({"step": 10, "loss": 5.0})" "\n" R"({"step": 20, "loss": 4.0})" "\n");
  RunFiles files({dir_});
  MetricsHistory history;
  files.poll(history);
  EXPECT_EQ(history.points(dir_.string()), 2u);
  std::ofstream(dir_ / "metrics.jsonl", std::ios::trunc) << R"({"step": 10, "loss": 5.0})" "\n";
  files.poll(history);
  EXPECT_EQ(history.points(dir_.string()), 1u);
  EXPECT_EQ(history.latest(dir_.string())->step, 10);
  // Replaced (as a resume replaces it) by a longer file before the next poll, its torn last line included: the
  // series starts again (before: read on from the old offset, the old points kept and a torn line joined to a
  // new one).
  append(dir_ / "metrics.jsonl", R"({"step": 20, "loss": 4.0, "elapsed_s": 0.08)");
  files.poll(history);
  std::string resumed;
  for (int step = 10; step <= 60; step += 10)
    resumed += fmt::format(R"({{"step": {}, "loss": 3.0}})"
                           "\n",
                           step);
  std::ofstream(dir_ / "metrics.new", std::ios::trunc) << resumed;
  fs::rename(dir_ / "metrics.new", dir_ / "metrics.jsonl");
  files.poll(history);
  EXPECT_EQ(history.points(dir_.string()), 6u);
  EXPECT_EQ(history.latest(dir_.string())->values[kLoss], 3.0);
}

TEST_F(RunFilesTest, GarbageAndOverlongLinesAreSkippedNotTrusted) {
  append(dir_ / "metrics.jsonl", std::string(RunFiles::kMaxLineBytes + 10, 'x') + "\n" + "not json\n" +
                                     R"({"step": "7"})" "\n" R"({"step": 7, "loss": "low", "membership_events": [1, {"kind": 5}]})" "\n");
  RunFiles files({dir_});
  MetricsHistory history;
  files.poll(history);
  EXPECT_EQ(history.points(dir_.string()), 1u);
  EXPECT_TRUE(std::isnan(history.latest(dir_.string())->values[kLoss]));
  const nlohmann::json status = files.status(history);
  ASSERT_EQ(status["events"].size(), 1u);
  EXPECT_EQ(status["events"][0]["kind"], "");
}

// An overlong line that is valid JSON is skipped too when it arrives whole in one read (it was taken then, and
// only a line cut between reads was skipped).
TEST_F(RunFilesTest, AnOverlongValidLineIsSkippedWhenItArrivesInOneRead) {
  std::string line = R"({"step": 5, "loss": 1.0, "pad": ")";
  line += std::string(RunFiles::kMaxLineBytes, ' ') + "\"}\n";
  append(dir_ / "metrics.jsonl", line + R"({"step": 6, "loss": 2.0})"
                                        "\n");
  RunFiles files({dir_});
  MetricsHistory history;
  files.poll(history);
  EXPECT_EQ(history.points(dir_.string()), 1u);
  EXPECT_EQ(history.latest(dir_.string())->step, 6);
}

// Events of near-megabyte details (a line may hold up to kMaxLineBytes) are kept cut, so /status stays small
// however many clients ask: 200 events of 1 MB each were ~200 MB per answer, and answers being sent at once
// took gigabytes (audit: a dashboard aborted with bad_alloc under a memory limit).
TEST_F(RunFilesTest, EventsAreKeptCutSoAStatusAnswerStaysSmall) {
  std::string lines;
  for (int step = 0; step < 300; ++step) {
    const nlohmann::json event = {{"kind", std::string(100, 'k')}, {"detail", "\u00e9" + std::string(900'000, 'd')}};
    lines += nlohmann::json{{"step", step}, {"membership_events", nlohmann::json::array({event})}}.dump() + "\n";
  }
  append(dir_ / "metrics.jsonl", lines);
  RunFiles files({dir_});
  MetricsHistory history;
  for (int poll = 0; poll < 100 && history.points(dir_.string()) < 300; ++poll) files.poll(history);
  ASSERT_EQ(history.points(dir_.string()), 300u);
  const nlohmann::json status = files.status(history);
  ASSERT_EQ(status["events"].size(), RunFiles::kMaxEvents);
  EXPECT_EQ(status["events"].back()["kind"].get<std::string>().size(), RunFiles::kMaxEventKindBytes);
  EXPECT_NE(status["events"].back()["detail"].get<std::string>().find("at step 299: \u00e9ddd"), std::string::npos);
  EXPECT_LT(status.dump().size(), 250'000u);
}

// A /status lists the kMaxStatusMembers files written last and counts the others: 5,000 members made it 1.1 MB.
TEST_F(RunFilesTest, AStatusListsTheMembersWrittenLastAndCountsTheRest) {
  const std::size_t members = RunFiles::kMaxStatusMembers + 44;
  for (std::size_t i = 0; i < members; ++i) {
    const fs::path path = dir_ / "members" / fmt::format("m{:04}-1", i) / "metrics.jsonl";
    append(path, R"({"step": 5, "loss": 6.0})" "\n");
    // The first 44 were written an hour ago.
    if (i < 44) fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(1));
  }
  RunFiles files({dir_});
  MetricsHistory history;
  files.poll(history);
  const nlohmann::json status = files.status(history);
  ASSERT_EQ(status["members"].size(), RunFiles::kMaxStatusMembers);
  EXPECT_EQ(status["members_not_shown"], 44);
  EXPECT_EQ(status["members"].front()["name"], (dir_ / "members" / "m0044-1").string());
  EXPECT_LT(status.dump().size(), 100'000u);
  // A member whose file is gone has no age: it comes last, and the answer is still given.
  std::error_code ignored;
  remove_tree(dir_ / "members" / "m0299-1", ignored);
  const nlohmann::json later = files.status(history);
  EXPECT_EQ(later["members"].size(), RunFiles::kMaxStatusMembers);
  EXPECT_EQ(later["members"].back()["name"], (dir_ / "members" / "m0298-1").string());
}

TEST_F(RunFilesTest, ADirectoryThatIsNotThereIsAConfigError) {
  EXPECT_THROW(RunFiles({dir_ / "missing"}), ConfigError);
}

}  // namespace
}  // namespace loco::monitor
