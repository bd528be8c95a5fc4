// The distributed settings of a run config: the exchange an algorithm uses, simulated replicas, robust
// aggregation and a simulated adversary, elastic runs, and churn schedules (dist.churn).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "loco/comm/codecs/codec.h"
#include "loco/config/adversary.h"
#include "loco/config/algorithms.h"
#include "loco/config/churn_schedule.h"
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

TEST(Config, ExchangeSettingsFollowTheAlgorithm) {
  ScratchDir dir;
  RunConfig c = load_text(dir, kValidConfig,
                          {"dist.algorithm=streaming", "streaming.codec=int4", "comm.codec=bf16", "comm.block_size=64",
                           "dist.check_sync=true", "model.num_hidden_layers=3"});
  EXPECT_EQ(c.exchange().codec, "int4");
  EXPECT_EQ(c.exchange().block_size, 64);
  EXPECT_TRUE(c.exchange().check_sync);
  c.dist.algorithm = "diloco";
  EXPECT_EQ(c.exchange().codec, "bf16");
}

// Simulated replicas of the outer-step algorithms may share a GPU; data parallel's and an elastic run's may
// not (their groups exchange device tensors through host-side collectives).
TEST(Config, SimulatedReplicasOnAGpuOnlyForOuterStepAlgorithms) {
  ScratchDir dir;
  for (const char* algorithm : {"diloco", "localsgd", "streaming", "noloco"}) {
    EXPECT_EQ(load_text(dir, kValidConfig,
                        {fmt::format("dist.algorithm={}", algorithm), "dist.replicas=2", "train.device=cuda"})
                  .train.device,
              "cuda")
        << algorithm;
  }
  EXPECT_NE(config_error(dir, kValidConfig, {"dist.algorithm=ddp", "dist.replicas=2", "train.device=cuda"})
                .find("runs the replicas of ddp on the CPU only"),
            std::string::npos);
  EXPECT_NE(config_error(dir, kValidConfig,
                         {"dist.algorithm=diloco", "dist.replicas=2", "dist.elastic=true", "dist.batch=per_replica",
                          "train.device=auto"})
                .find("runs the replicas of an elastic run on the CPU only"),
            std::string::npos);
  EXPECT_EQ(load_text(dir, kValidConfig, {"dist.algorithm=ddp", "dist.replicas=1", "train.device=cuda"}).dist.replicas,
            1);  // one replica: nothing is exchanged
}

// dist.aggregation applies to outer steps; its numbers are checked; dist.adversary parses its two forms.
TEST(Config, RobustAggregationAndASimulatedAdversary) {
  ScratchDir dir;
  const std::vector<std::string> diloco = {"dist.algorithm=diloco", "dist.replicas=4", "dist.batch=per_replica"};
  auto with = [&](std::vector<std::string> changes) {
    std::vector<std::string> overrides = diloco;
    overrides.insert(overrides.end(), changes.begin(), changes.end());
    return overrides;
  };
  EXPECT_EQ(load_text(dir, kValidConfig, with({"dist.aggregation=centered_clip"})).exchange().aggregation.rule,
            "centered_clip");
  EXPECT_NE(config_error(dir, kValidConfig, with({"dist.aggregation=mode"})).find("dist.aggregation"),
            std::string::npos);
  EXPECT_NE(config_error(dir, kValidConfig,
                         {"dist.algorithm=ddp", "dist.replicas=2", "dist.batch=per_replica", "dist.aggregation=median"})
                .find("needs dist.algorithm diloco, localsgd, streaming or sparseloco, not ddp"),
            std::string::npos);
  EXPECT_NE(config_error(dir, kValidConfig, with({"dist.trim=0"})).find("dist.trim (0) must be at least 1"),
            std::string::npos);
  EXPECT_NE(config_error(dir, kValidConfig, with({"dist.clip_radius=-1"})).find("dist.clip_radius"), std::string::npos);
  // Sizes near 2^63 overflowed: a block size sent 0 bytes (replicas apart), a timeout expired at once.
  EXPECT_NE(config_error(dir, kValidConfig, with({"comm.block_size=9223372036854775807"}))
                .find("comm.block_size (9223372036854775807) must be from 1 to 1048576 values per scale"),
            std::string::npos);
  EXPECT_NE(config_error(dir, kValidConfig, with({"comm.timeout_s=1e10"})).find("must be positive and at most 1000000"),
            std::string::npos);
  // A static run's trimmed_mean must keep a value: 4 replicas allow b = 1 (before: b = 2 ran as 1, silently).
  EXPECT_EQ(
      load_text(dir, kValidConfig, with({"dist.aggregation=trimmed_mean", "dist.trim=1"})).exchange().aggregation.trim,
      1);
  EXPECT_NE(config_error(dir, kValidConfig, with({"dist.aggregation=trimmed_mean", "dist.trim=2"}))
                .find("dist.trim (2) drops that many of each coordinate's 4 values from each end, but trimmed_mean "
                      "must keep at least one: with dist.replicas = 4 set dist.trim to at most 1"),
            std::string::npos);
  // (Before: 2·trim overflowed for 2^62, and the run averaged plainly.)
  EXPECT_NE(config_error(dir, kValidConfig, with({"dist.aggregation=trimmed_mean", "dist.trim=4611686018427387904"}))
                .find("set dist.trim to at most 1"),
            std::string::npos);
  EXPECT_NE(config_error(dir, kValidConfig, with({"dist.algorithm=diloco", "comm.round_kib=1e-30"}))
                .find("comm.round_kib '1e-30' is not a round size"),
            std::string::npos);
  EXPECT_NE(config_error(
                dir, kValidConfig,
                {"dist.algorithm=diloco", "dist.replicas=2", "dist.batch=per_replica", "dist.aggregation=trimmed_mean"})
                .find("no value can be dropped; use dist.aggregation = \"mean\" or \"median\""),
            std::string::npos);
  // An elastic run of threads has at most its dist.replicas members (before: b = 5 of 2 threads ran as the mean);
  // one of processes may grow, and b is lowered at each synchronisation.
  const std::vector<std::string> elastic = {
      "dist.algorithm=diloco",         "dist.elastic=true", "dist.replicas=3", "dist.batch=per_replica",
      "dist.aggregation=trimmed_mean", "dist.trim=5"};
  EXPECT_NE(config_error(dir, kValidConfig, elastic).find("with dist.replicas = 3 set dist.trim to at most 1"),
            std::string::npos);
  std::vector<std::string> processes = elastic;
  processes.push_back("dist.backend=gloo");
  EXPECT_EQ(load_text(dir, kValidConfig, processes).exchange().aggregation.trim, 5);

  const auto adversary = load_text(dir, kValidConfig, with({"dist.adversary=3@100:scale=-100"})).exchange().adversary;
  ASSERT_TRUE(adversary.has_value());
  EXPECT_EQ(adversary->replica, 3);
  EXPECT_EQ(adversary->from_step, 100);
  EXPECT_EQ(adversary->kind, AdversarySpec::Kind::scale);
  EXPECT_DOUBLE_EQ(adversary->factor, -100);
  EXPECT_EQ(parse_adversary("1@0:noise", 2)->kind, AdversarySpec::Kind::noise);
  EXPECT_FALSE(parse_adversary("", 2).has_value());
  for (const auto& [text, why] :
       std::vector<std::pair<std::string, std::string>>{{"4@10:noise", "replica 4 does not exist"},
                                                        {"1@10:scale=abc", "'abc' is not a finite number"},
                                                        {"1@10:scale=inf", "not a finite number"},
                                                        {"1:noise", "not understood"},
                                                        {"1@10:flip", "not understood"}}) {
    try {
      parse_adversary(text, 4);
      ADD_FAILURE() << text << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << text << ": " << e.what();
    }
  }
  EXPECT_EQ(parse_adversary("1@5:nan", 2)->kind, AdversarySpec::Kind::nan);
  EXPECT_TRUE(load_text(dir, kValidConfig,
                        {"dist.algorithm=diloco", "dist.replicas=2", "dist.elastic=true", "dist.batch=per_replica",
                         "dist.adversary=1@10:nan"})
                  .dist.elastic);
  EXPECT_NE(
      config_error(dir, kValidConfig,
                   {"dist.algorithm=ddp", "dist.replicas=2", "dist.batch=per_replica", "dist.adversary=1@10:noise"})
          .find("in the outer step of diloco, localsgd, streaming or sparseloco"),
      std::string::npos);
}

TEST(Config, ElasticRunsNeedPerReplicaBatchesAndAnAlgorithmThatIsElastic) {
  ScratchDir dir;
  const std::vector<std::string> elastic = {"dist.elastic=true", "dist.algorithm=diloco", "dist.backend=gloo",
                                            "dist.batch=per_replica", "dist.replicas=2"};
  EXPECT_TRUE(load_text(dir, kValidConfig, elastic).dist.elastic);
  auto with = [&](const std::string& change) {
    std::vector<std::string> overrides = elastic;
    overrides.push_back(change);
    return config_error(dir, kValidConfig, overrides);
  };
  EXPECT_NE(config_error(dir, kValidConfig,
                         {"dist.elastic=true", "dist.algorithm=none", "dist.backend=gloo", "dist.batch=per_replica",
                          "dist.replicas=1"})
                .find("diloco, localsgd, streaming, sparseloco, noloco or ddp"),
            std::string::npos);
  // The emulated link belongs to fixed groups: an elastic run would silently go without it.
  EXPECT_NE(with("comm.bandwidth_mbps=10").find("not emulated there: leave them empty"), std::string::npos);
  EXPECT_NE(with("comm.latency_ms=50").find("scripts/netns_run.sh"), std::string::npos);
  // Streaming: one overlapped exchange in flight at most (H = 100, 2 fragments: one synchronises every 50 steps).
  for (const std::string overlap : {"0", "1", "49"}) {
    auto o = elastic;
    o.push_back("dist.algorithm=streaming");
    o.push_back("streaming.overlap=" + overlap);
    EXPECT_TRUE(load_text(dir, kValidConfig, o).dist.elastic) << overlap;
  }
  {
    auto o = elastic;
    o.push_back("dist.algorithm=streaming");
    o.push_back("streaming.overlap=50");
    EXPECT_NE(config_error(dir, kValidConfig, o)
                  .find("streaming.overlap (50) below the spacing of its fragments' "
                        "synchronisations, streaming.sync_every / fragments = 50"),
              std::string::npos);
  }
  EXPECT_TRUE(load_text(dir, kValidConfig,
                        [&] {  // replicas as threads, with a coordinator in the process
                          auto o = elastic;
                          o.push_back("dist.backend=local");
                          return o;
                        }())
                  .dist.elastic);
  EXPECT_NE(with("dist.batch=split").find("per_replica"), std::string::npos);
  EXPECT_TRUE(load_text(dir, kValidConfig,
                        [&] {
                          auto o = elastic;
                          o.push_back("dist.algorithm=localsgd");
                          return o;
                        }())
                  .dist.elastic);
  EXPECT_TRUE(load_text(dir, kValidConfig,
                        [&] {  // a quorum and a vote every step
                          auto o = elastic;
                          o.push_back("dist.algorithm=ddp");
                          return o;
                        }())
                  .dist.elastic);
  EXPECT_TRUE(load_text(dir, kValidConfig,
                        [&] {  // pairs drawn from each quorum
                          auto o = elastic;
                          o.push_back("dist.algorithm=noloco");
                          return o;
                        }())
                  .dist.elastic);
}

// Every key means in an elastic run what it means in a static one (note "membership"), or is refused there:
// the DiLoCo family's weights, drops and check take effect in both (tests/membership/runs/elastic_parity_test.cpp
// shows it); data parallel's buckets exist only in static runs.
TEST(Config, ElasticRunsTakeEveryKeyThatTheyUseAndRefuseTheOthers) {
  ScratchDir dir;
  const std::vector<std::string> elastic = {"dist.elastic=true", "dist.backend=gloo", "dist.batch=per_replica",
                                            "dist.replicas=3"};
  auto with = [&](std::vector<std::string> changes) {
    changes.insert(changes.begin(), elastic.begin(), elastic.end());
    return changes;
  };
  const RunConfig outer = load_text(
      dir, kValidConfig,
      with({"dist.algorithm=diloco", "diloco.weighted=true", "diloco.drop_rate=0.2", "dist.check_sync=true"}));
  EXPECT_TRUE(outer.diloco.weighted);
  EXPECT_DOUBLE_EQ(outer.diloco.drop_rate, 0.2);
  EXPECT_TRUE(outer.exchange().check_sync);
  EXPECT_TRUE(load_text(dir, kValidConfig, with({"dist.algorithm=ddp"})).dist.elastic);
  for (const std::string key : {"ddp.bucket_mb=4", "ddp.first_bucket_mb=0.5", "ddp.overlap=false"}) {
    const std::string error = config_error(dir, kValidConfig, with({"dist.algorithm=ddp", key}));
    EXPECT_NE(error.find("dist.elastic = true exchanges data parallel's gradients in one piece"), std::string::npos)
        << key << ": " << error;
    EXPECT_NE(error.find("Leave them at their defaults (25, 1, true)"), std::string::npos) << error;
  }
  // The same keys shape a static run.
  const RunConfig buckets = load_text(dir, kValidConfig, {"dist.algorithm=ddp", "dist.replicas=2", "ddp.bucket_mb=4"});
  EXPECT_DOUBLE_EQ(buckets.ddp.bucket_mb, 4);
}

// dist.churn (config/churn_schedule.h): simulated faults of an elastic run of replica threads.
// random:SEED[:FAULTS] draws a schedule that the explicit form's checks accept, portably (pinned), within
// the run's steps, never with every replica gone at once, and with as many faults as asked when there is
// room; the explicit form it prints parses back to the same events.
TEST(Config, RandomChurnSchedulesAreSeededAndSound) {
  const auto drawn = parse_churn_schedule("random:7:4", 3, 200);
  EXPECT_EQ(format_churn_schedule(drawn), "0@51:stall=3, 1@63:leave, 2@89:stall=5, 1@95:return, 0@160:stall=2");
  EXPECT_EQ(format_churn_schedule(parse_churn_schedule(format_churn_schedule(drawn), 3, 200)),
            format_churn_schedule(drawn));
  EXPECT_EQ(parse_churn_schedule("random:7", 3, 200).size(), parse_churn_schedule("random:7:3", 3, 200).size());
  EXPECT_NE(format_churn_schedule(parse_churn_schedule("random:8:4", 3, 200)), format_churn_schedule(drawn));
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    for (const std::int64_t replicas : {1, 2, 4}) {
      const auto events = parse_churn_schedule(fmt::format("random:{}:3", seed), replicas, 100);
      std::int64_t faults = 0, gone = 0;
      for (const ChurnEvent& e : events) {  // by step; at one step returns are not known to come first
        EXPECT_GE(e.step, 1);
        EXPECT_LE(e.step, 99);
        faults += e.kind == ChurnEvent::Kind::rejoin ? 0 : 1;
      }
      for (std::int64_t step = 1; step < 100; ++step) {  // replicas gone after `step`
        gone = 0;
        for (std::int64_t r = 0; r < replicas; ++r) {
          bool away = false;
          for (const ChurnEvent& e : churn_events_of(events, static_cast<int>(r))) {
            if (e.step > step) break;
            if (e.kind == ChurnEvent::Kind::leave) away = true;
            if (e.kind == ChurnEvent::Kind::rejoin && e.step <= step) away = false;
          }
          gone += away ? 1 : 0;
        }
        EXPECT_LT(gone, replicas) << "seed " << seed << ": every replica gone after step " << step;
      }
      if (replicas > 1) {
        EXPECT_EQ(faults, 3) << "seed " << seed << ", " << replicas << " replicas";
      }
    }
  }
  EXPECT_TRUE(parse_churn_schedule("random:7:4", 3, 2).empty());  // no room
  std::string refused;
  try {
    parse_churn_schedule("random:x", 3, 100);
  } catch (const ConfigError& e) {
    refused = e.what();
  }
  EXPECT_NE(refused.find("write random:SEED or random:SEED:FAULTS"), std::string::npos) << refused;
  // Found by the config fuzzer: a schedule's cost follows its faults and the replicas it names, not
  // dist.replicas (an elastic run of 39999999999999999999999999999 replicas hung in the check).
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"random:8", "asks for 5000 faults (one per replica); a random schedule draws at most 1000"},
           {"random:8:1001", "asks for 1001 faults; a random schedule draws at most 1000"}}) {
    try {
      parse_churn_schedule(text, 5000, 100);
      ADD_FAILURE() << text << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_churn_schedule("random:8:0", std::int64_t{1} << 62, 50).size(), 0u);
  EXPECT_EQ(parse_churn_schedule("3@10:leave, 3@20:return", std::int64_t{1} << 62, 50).size(), 2u);
  ScratchDir dir;
  EXPECT_NE(config_error(dir, kValidConfig, {"dist.algorithm=diloco", "dist.replicas=65537"})
                .find("dist.replicas (65537) must be at most 65536"),
            std::string::npos);
}

TEST(Config, ChurnSchedulesAreParsedAndCheckedBeforeTraining) {
  const auto events = parse_churn_schedule(" 2@40:leave, 1@60:stall=2.5,2@80:return ", 3, 100);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].replica, 2);
  EXPECT_EQ(events[0].step, 40);
  EXPECT_EQ(events[0].kind, ChurnEvent::Kind::leave);
  EXPECT_EQ(events[1].kind, ChurnEvent::Kind::stall);
  EXPECT_DOUBLE_EQ(events[1].seconds, 2.5);
  EXPECT_EQ(events[2].kind, ChurnEvent::Kind::rejoin);
  const auto until = parse_churn_schedule("1@60:stall-until=90", 3, 100);
  ASSERT_EQ(until.size(), 1u);
  EXPECT_EQ(until[0].kind, ChurnEvent::Kind::stall);
  EXPECT_EQ(until[0].until_step, 90);
  EXPECT_EQ(until[0].seconds, 0);
  EXPECT_EQ(format_churn_schedule(until), "1@60:stall-until=90");
  const auto of_two = churn_events_of(parse_churn_schedule("2@80:return,2@40:leave,2@80:leave,2@90:return", 3, 100), 2);
  ASSERT_EQ(of_two.size(), 4u);  // by step; at step 80 the return (ending the leave at 40) comes first
  EXPECT_EQ(of_two[0].step, 40);
  EXPECT_EQ(of_two[1].kind, ChurnEvent::Kind::rejoin);
  EXPECT_EQ(of_two[1].step, 80);
  EXPECT_EQ(of_two[2].kind, ChurnEvent::Kind::leave);
  EXPECT_EQ(of_two[3].step, 90);
  EXPECT_TRUE(parse_churn_schedule("", 3, 100).empty());

  const auto error = [](const std::string& text) {
    try {
      parse_churn_schedule(text, 3, 100);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("2@40:explode").find("'2@40:explode' is not an event; write R@S:leave"), std::string::npos);
  EXPECT_NE(error("3@40:leave").find("names replica 3, but dist.replicas is 3"), std::string::npos);
  EXPECT_NE(error("1@0:leave").find("steps count from 1"), std::string::npos);
  // A fault after the last step never happens (before: accepted, and the run looked as if it survived it).
  EXPECT_NE(error("1@101:leave")
                .find("'1@101:leave' is at step 101, after the run's last step 100 (train.steps): "
                      "it would never happen; give a step from 1 to 100"),
            std::string::npos);
  EXPECT_EQ(parse_churn_schedule("1@100:stall=1", 3, 100).size(), 1u);
  EXPECT_NE(error("1@5:stall=0").find("positive number of seconds"), std::string::npos);
  // Bounded as comm.timeout_s: 10^11 s overflowed the pause's nanoseconds (the run hung), 400 digits were
  // "unexpected error: stod".
  EXPECT_NE(error("1@5:stall=99999999999").find("at most 1e+06 (11.6 days)"), std::string::npos);
  EXPECT_NE(error("1@5:stall=" + std::string(400, '9')).find("at most 1e+06"), std::string::npos);
  EXPECT_EQ(parse_churn_schedule("1@5:stall=1000000", 3, 100).size(), 1u);
  EXPECT_NE(error("1@60:stall-until=60").find("until a step after 60 and at most the run's 100"), std::string::npos);
  EXPECT_NE(error("1@60:stall-until=101").find("at most the run's 100 (train.steps)"), std::string::npos);
  EXPECT_NE(error("1@50:return").find("replica 1 at step 50 returns, but it has not left"), std::string::npos);
  EXPECT_NE(error("1@50:leave,1@60:stall=1").find("stalls, but it left earlier"), std::string::npos);

  ScratchDir dir;
  const std::vector<std::string> local = {"dist.elastic=true", "dist.algorithm=diloco", "dist.batch=per_replica",
                                          "dist.replicas=3", "dist.churn=2@4:leave"};
  EXPECT_EQ(load_text(dir, kValidConfig, local).dist.churn, "2@4:leave");
  auto with = [&](const std::string& change) {
    std::vector<std::string> overrides = local;
    overrides.push_back(change);
    return config_error(dir, kValidConfig, overrides);
  };
  EXPECT_EQ(load_text(dir, kValidConfig,
                      [&] {  // the ranks of loco launch --elastic play it too
                        auto o = local;
                        o.push_back("dist.backend=gloo");
                        return o;
                      }())
                .dist.churn,
            "2@4:leave");
  EXPECT_NE(with("dist.elastic=false").find("needs dist.elastic = true"), std::string::npos);
  EXPECT_NE(with("dist.churn=5@4:leave").find("names replica 5"), std::string::npos);
}

}  // namespace
}  // namespace loco
