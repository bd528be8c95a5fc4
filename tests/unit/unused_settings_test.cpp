#include "loco/config/unused_settings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loco/config/load_config.h"

namespace loco {
namespace {

// A completed config of `assignments` (section.key=value, as --set takes them) over the defaults.
RunConfig config_with(const std::vector<std::string>& assignments) {
  RunConfig config;
  config.train.steps = 1000;  // past the default warm-up of 100
  for (const std::string& assignment : assignments) apply_override(config, assignment);
  resolve_derived(config);
  validate(config);
  return config;
}

std::vector<std::string> notes_of(const std::vector<std::string>& assignments) {
  return unused_settings(config_with(assignments));
}

TEST(UnusedSettings, TheDefaultsAndEveryKeyTheRunReadsSayNothing) {
  EXPECT_TRUE(notes_of({}).empty());
  EXPECT_TRUE(
      notes_of({"dist.algorithm=diloco", "dist.replicas=2", "diloco.sync_every=50", "diloco.outer_lr=0.5",
                "comm.codec=int8", "comm.block_size=64", "dist.check_sync=true", "dist.aggregation=centered_clip",
                "dist.clip_radius=2", "dist.clip_iterations=5", "comm.bandwidth_mbps=100", "comm.delay=full",
                "optim.schedule=wsd", "optim.decay_fraction=0.3", "train.device=auto", "train.cuda_graphs=true"})
          .empty());
  EXPECT_TRUE(
      notes_of({"dist.algorithm=streaming", "dist.replicas=2", "streaming.overlap=1", "streaming.mix=0.3",
                "comm.block_size=64", "dist.aggregation=trimmed_mean", "dist.replicas=3", "train.batch_size=18"})
          .empty());
  // The stages' codec quantises with comm.block_size too.
  EXPECT_TRUE(notes_of({"model.num_hidden_layers=2", "dist.stages=2", "pipeline.codec=int8", "comm.block_size=64",
                        "pipeline.schedule=eager"})
                  .empty());
}

TEST(UnusedSettings, AnotherAlgorithmsKeyIsNamedWhereTheRunsOwnIsLeftAtItsDefault) {
  const auto notes = notes_of({"dist.algorithm=streaming", "dist.replicas=2", "diloco.sync_every=50",
                               "noloco.sync_every=20", "diloco.outer_lr=0.5", "diloco.weighted=true"});
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0],
            "diloco.sync_every = 50, noloco.sync_every = 20 have no effect: dist.algorithm = \"streaming\" "
            "reads streaming.sync_every instead, left at its default 100");
  EXPECT_EQ(notes[1],
            "diloco.outer_lr = 0.5 has no effect: dist.algorithm = \"streaming\" reads streaming.outer_lr "
            "instead, left at its default 0.4");
  // A key of one algorithm alone is named wherever it is changed (audit round 11: drop_rate under streaming).
  EXPECT_EQ(notes[2], "diloco.weighted = true has no effect: dist.algorithm = \"streaming\" reads no [diloco] key");
  // The presets' pattern: H, η and μ tuned in each algorithm's section for a switch by --set, and a lone replica
  // or an algorithm without such a key beside them, say nothing.
  EXPECT_TRUE(notes_of({"dist.algorithm=streaming", "dist.replicas=2", "diloco.outer_lr=0.5", "streaming.outer_lr=0.5"})
                  .empty());
  EXPECT_TRUE(notes_of({"diloco.sync_every=50", "diloco.outer_momentum=0.5"}).empty());
  EXPECT_TRUE(notes_of({"dist.algorithm=localsgd", "dist.replicas=2", "diloco.outer_lr=0.5"}).empty());
  // Keys that only share a name are not paired (ddp.overlap is a switch, streaming.overlap a number of steps).
  EXPECT_EQ(notes_of({"dist.algorithm=streaming", "dist.replicas=2", "ddp.overlap=false"}),
            std::vector<std::string>{"ddp.overlap = false has no effect: dist.algorithm = \"streaming\" reads no "
                                     "[ddp] key"});
}

TEST(UnusedSettings, ShapeDependentKeysAreNamedWhereTheShapeDoesNotReadThem) {
  const auto has_note = [](const std::vector<std::string>& assignments, const std::string& part) {
    const auto notes = notes_of(assignments);
    const bool found = notes.size() == 1 && notes[0].find(part) != std::string::npos;
    for (const std::string& note : notes) {
      if (!found) ADD_FAILURE() << "note: " << note;
    }
    return found;
  };
  EXPECT_TRUE(has_note({"pipeline.schedule=eager"},
                       "pipeline.schedule = \"eager\" has no effect: [pipeline] shapes "
                       "a replica split into stages, and dist.stages = 1 splits none"));
  EXPECT_TRUE(has_note({"dist.algorithm=diloco", "dist.batch=per_replica", "dist.replicas=3", "dist.aggregation=median",
                        "dist.clip_radius=3"},
                       "dist.clip_radius = 3.0 has no effect: it is a parameter of dist.aggregation = "
                       "\"centered_clip\", and this run aggregates by \"median\""));
  EXPECT_TRUE(has_note({"dist.algorithm=diloco", "dist.batch=per_replica", "dist.replicas=3", "dist.trim=2"},
                       "dist.trim = 2 has no effect: it is a parameter of dist.aggregation = \"trimmed_mean\""));
  EXPECT_TRUE(has_note({"dist.algorithm=ddp", "dist.replicas=2", "dist.check_sync=true"},
                       "dist.check_sync = true has no effect"));
  EXPECT_TRUE(has_note({"dist.algorithm=noloco", "dist.replicas=2", "dist.check_sync=true"},
                       "dist.algorithm = \"noloco\" has none"));
  EXPECT_TRUE(has_note({"dist.algorithm=diloco", "dist.replicas=2", "comm.block_size=64"},
                       "comm.block_size = 64 has no effect: it sizes the scale blocks"));
  EXPECT_TRUE(has_note({"dist.algorithm=diloco", "dist.replicas=2", "comm.codec=bf16", "comm.block_size=64"},
                       "comm.block_size = 64 has no effect"));
  EXPECT_TRUE(has_note({"dist.algorithm=streaming", "dist.replicas=2", "streaming.codec=fp32", "comm.block_size=64"},
                       "comm.block_size = 64 has no effect"));
  EXPECT_TRUE(has_note({"dist.algorithm=sparseloco", "dist.replicas=2", "comm.block_size=64"},
                       "comm.block_size = 64 has no effect"));
  EXPECT_TRUE(has_note({"dist.algorithm=diloco", "dist.replicas=2", "comm.delay=full"},
                       "comm.delay = \"full\" has no effect: it says how an emulated link shows in real time"));
  EXPECT_TRUE(has_note({"dist.algorithm=streaming", "dist.replicas=2", "streaming.overlap=0", "streaming.mix=0.2"},
                       "streaming.mix = 0.2 has no effect"));
  EXPECT_TRUE(has_note({"optim.decay_fraction=0.3"},
                       "optim.decay_fraction = 0.3 has no effect: it is the decay of optim.schedule = \"wsd\", and "
                       "this run's schedule is \"cosine\""));
  EXPECT_TRUE(
      has_note({"optim.schedule=constant", "optim.min_lr_ratio=0.5"}, "optim.min_lr_ratio = 0.5 has no effect"));
  EXPECT_TRUE(has_note({"train.cuda_graphs=true"},
                       "train.cuda_graphs = true has no effect: this run trains on the CPU, which launches no CUDA "
                       "kernels"));
  // Audit round 12: a lone replica's batch mode, and periods no shorter than the run.
  EXPECT_TRUE(has_note({"dist.batch=per_replica"},
                       "dist.batch = \"per_replica\" has no effect: a single replica's batch is the whole batch"));
  EXPECT_TRUE(
      has_note({"train.steps=500", "train.checkpoint_every=500", "train.eval_every=800"},
               "train.eval_every = 800, train.checkpoint_every = 500 have no effect: train.steps = 500 ends the "
               "run by then: each acts at the last step alone, as 0 does"));
  EXPECT_TRUE(notes_of({"train.steps=500", "train.checkpoint_every=499", "train.eval_every=250", "dist.replicas=2",
                        "dist.algorithm=ddp", "dist.batch=per_replica"})
                  .empty());
}

TEST(UnusedSettings, ALoneReplicasLinkKeysAreOneSentence) {
  const auto notes = notes_of({"comm.bandwidth_mbps=100", "comm.latency_ms=20", "comm.timeout_s=30"});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "comm.bandwidth_mbps = \"100\", comm.latency_ms = \"20\", comm.timeout_s = 30.0 have no effect: "
            "a single replica (dist.replicas = 1, dist.stages = 1) exchanges nothing");
  // Whatever its algorithm; its codec still quantises its own pseudo-gradient.
  EXPECT_EQ(notes_of({"dist.algorithm=diloco", "comm.bandwidth_mbps=10", "comm.codec=int4", "comm.block_size=64"}),
            std::vector<std::string>{"comm.bandwidth_mbps = \"10\" has no effect: a single replica (dist.replicas = 1, "
                                     "dist.stages = 1) exchanges nothing"});
  EXPECT_TRUE(notes_of({"dist.algorithm=diloco", "dist.replicas=2", "comm.bandwidth_mbps=10"}).empty());
  // A lone replica's stages pass activations over [pipeline]'s link, and wait comm.timeout_s for each other.
  EXPECT_EQ(notes_of({"model.num_hidden_layers=2", "dist.stages=2", "comm.bandwidth_mbps=10", "comm.timeout_s=30"}),
            std::vector<std::string>{"comm.bandwidth_mbps = \"10\" has no effect: a single replica (dist.replicas = "
                                     "1) exchanges nothing with others; its stages' link is [pipeline]'s"});
}

TEST(UnusedSettings, StopChecksAreNamedWhereReplicasMeetEveryStep) {
  const std::string key = "train.stop_check_every=5";
  EXPECT_EQ(notes_of({key}), std::vector<std::string>{"train.stop_check_every = 5 has no effect: a single replica "
                                                      "checks for a stop every step"});
  EXPECT_EQ(notes_of({key, "dist.algorithm=ddp", "dist.replicas=2"}),
            std::vector<std::string>{"train.stop_check_every = 5 has no effect: data parallel replicas meet, and "
                                     "check for a stop, every step"});
  EXPECT_TRUE(notes_of({key, "dist.algorithm=diloco", "dist.replicas=2"}).empty());
}

// Whether their keys were changed or not: the default warm-up of 100 steps in a run of 50.
TEST(UnusedSettings, ASchedulesRunTooShortToReachItIsNamed) {
  EXPECT_EQ(notes_of({"train.steps=50"}),
            std::vector<std::string>{"optim.schedule = \"cosine\" has no effect: optim.warmup_steps = 100 is not below "
                                     "train.steps = 50, so the learning rate rises for the whole run, to 0.00015 (50% "
                                     "of optim.lr), and never decays"});
  EXPECT_EQ(notes_of({"train.steps=10", "optim.warmup_steps=2", "optim.schedule=wsd", "optim.decay_fraction=0.01"}),
            std::vector<std::string>{"optim.decay_fraction = 0.01 has no effect: 0.01 of train.steps = 10 rounds to no "
                                     "decay step, so optim.schedule = \"wsd\" keeps optim.lr to the end"});
  EXPECT_TRUE(notes_of({"train.steps=101"}).empty());
}

// A sweep's axis is judged whatever its value: any key of another algorithm's section, and the keys the notes
// name for a shape.
TEST(UnusedSettings, WhyAKeyIsNotReadWhateverItsValue) {
  const RunConfig streaming = config_with({"dist.algorithm=streaming", "dist.replicas=2"});
  EXPECT_EQ(why_not_read("diloco.outer_lr", streaming), "dist.algorithm = \"streaming\" reads no [diloco] key");
  EXPECT_EQ(why_not_read("streaming.outer_lr", streaming), std::nullopt);
  EXPECT_EQ(why_not_read("pipeline.schedule", streaming),
            "[pipeline] shapes a replica split into stages, and dist.stages = 1 splits none");
  EXPECT_EQ(why_not_read("optim.lr", streaming), std::nullopt);
  EXPECT_EQ(why_not_read("no.such_key", streaming), std::nullopt);
  EXPECT_EQ(why_not_read("nodot", streaming), std::nullopt);
}

}  // namespace
}  // namespace loco
