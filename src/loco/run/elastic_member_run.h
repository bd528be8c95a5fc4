// `loco train` as one member of an elastic run (dist.elastic = true; docs/fault-tolerance.md): joins the
// coordinator named by LOCO_COORDINATOR and LOCO_RUN_ID, and trains with the quorums it forms. Built
// with cpp-httplib only (LOCO_HAVE_MEMBERSHIP).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>

#include "loco/membership/member_client.h"
#include "loco/train/trainer.h"

namespace loco::run {

// Called after each optimizer step with the member's client (simulated stalls pause its heartbeats).
using MemberStepHook = std::function<void(std::int64_t step, membership::MemberClient& member)>;

// Joins as `member_options` says and trains `options` (complete config) with groups of `backend` ("gloo"
// or "nccl"), as replica `replica` of the run's numbering (thread r, or rank R of loco launch --elastic;
// -1: none): fills the membership and the strategy factory. Nullopt when other members finished the run
// while this one was behind (it says so on stderr; not a failure). `life`: which process of its rank this is
// (LOCO_RANK_START); one started again (> 1) resumes from its earlier processes' latest checkpoint.
std::optional<TrainSummary> train_as_member(TrainOptions options, const membership::MemberOptions& member_options,
                                            const std::string& backend, int replica,
                                            const MemberStepHook& after_step = {}, std::int64_t life = 1);

// Note "resume-earlier-life": the latest whole checkpoint (or, given `step`, that step's) that the lives of the
// member named `name` wrote in the run's `members` directory (members/NAME-k/checkpoints/step_N, any k). Whole:
// with the part of each of `stages` stages, for a pipeline replica's checkpoint is its first stage's, its other
// stages' parts in stage_s/ beside it (one stage may have died before writing its part).
std::optional<std::filesystem::path> checkpoint_of_lives(const std::filesystem::path& members, const std::string& name,
                                                         int stages, std::optional<std::int64_t> step = std::nullopt);

// Note "own-part": a resume names one member's checkpoint (OUT/members/NAME-k/checkpoints/step_N, as a stop's
// advice prints it), and one command line resumes every rank of `loco launch --elastic` (and every replica
// thread). Member `name` (a pipeline stage: its replica's first stage's) resumes from its own part of that
// step, in whichever of its lives wrote one: nullopt when `named` is no member's checkpoint or none of `name`'s
// lives wrote that step. Before, every member resumed from the named part: the others' AdamW moments, data
// positions and outer states were that member's, and the resume was not the uninterrupted run.
std::optional<std::filesystem::path> own_part_of(const std::filesystem::path& named, const std::string& name,
                                                 int stages);

// The member a process is: its coordinator and run from the environment, its name from LOCO_MEMBER_NAME
// (or host-pid).
std::optional<TrainSummary> train_elastic_member(TrainOptions options);

}  // namespace loco::run
