#include "loco/run/elastic_member_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "loco/comm/comm_error.h"
#include "loco/config/algorithms.h"
#include "loco/config/churn_schedule.h"
#include "loco/config/load_config.h"
#include "loco/data/dataset_meta.h"
#include "loco/elastic/make_elastic_strategy.h"
#include "loco/elastic/quorum_membership.h"
#include "loco/membership/run_secret.h"
#include "loco/membership/status_client.h"
#include "loco/membership/untrusted_text.h"
#include "loco/run/churn_player.h"
#include "loco/run/replica_runs.h"
#include "loco/train/checkpoint.h"
#include "loco/train/run_directory.h"
#include "loco/train/runtime.h"
#include "loco/util/error.h"
#include "loco/util/parse_number.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/signal_name.h"

namespace loco::run {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// LOCO_MEMBER_NAME as given, refused unless a plain name (it names the member in the coordinator's log, in its
// ids and in its directory members/NAME-k); or host-pid, with any character a plain name does not allow as '-'.
std::string member_name() {
  const std::string given = environment("LOCO_MEMBER_NAME");
  if (!given.empty()) {
    if (!membership::plain_name(given)) {
      throw ConfigError(
          fmt::format("LOCO_MEMBER_NAME '{}' is not a member name: give 1 to {} letters, digits, '.', "
                      "'_' or '-' (it names the member in the coordinator's log, its ids and its "
                      "directory members/NAME-k), or leave it unset for host-pid",
                      membership::loggable(given), membership::kMaxNameLength));
    }
    return given;
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string name = fmt::format("{}-{}", host, ::getpid());
  for (char& c : name) {
    if (!membership::plain_name(std::string_view(&c, 1))) c = '-';
  }
  return name.substr(0, membership::kMaxNameLength);
}

// Whether `directory` (a name in members/) is one of the lives of member `name`: NAME-k.
bool life_of(const std::string& directory, const std::string& name) {
  return directory.size() > name.size() + 1 && directory.compare(0, name.size() + 1, name + "-") == 0 &&
         directory.find_first_not_of("0123456789", name.size() + 1) == std::string::npos;
}

}  // namespace

std::optional<std::filesystem::path> checkpoint_of_lives(const std::filesystem::path& members, const std::string& name,
                                                         int stages, std::optional<std::int64_t> step) {
  std::error_code unreadable;
  std::filesystem::directory_iterator lives(members, unreadable);
  if (unreadable) return std::nullopt;
  std::optional<std::pair<std::int64_t, std::filesystem::path>> latest;
  for (const auto& entry : lives) {
    const std::string directory = entry.path().filename().string();
    if (!life_of(directory, name)) continue;
    for (const auto& [at, checkpoint] : list_checkpoints(entry.path() / "checkpoints")) {
      if ((step && at != *step) || (latest && at <= latest->first)) continue;
      bool whole = true;
      for (int stage = 1; stage < stages && whole; ++stage) {
        whole = std::filesystem::is_directory(stage_checkpoint(checkpoint, stage), unreadable);
      }
      if (whole) latest = {at, checkpoint};
    }
  }
  if (!latest) return std::nullopt;
  return latest->second;
}

std::optional<std::filesystem::path> own_part_of(const std::filesystem::path& named, const std::string& name,
                                                 int stages) {
  const std::filesystem::path checkpoint = checkpoint_location(named);
  const std::optional<std::int64_t> step = checkpoint_step(checkpoint.filename().string());
  const std::filesystem::path members = checkpoint.parent_path().parent_path().parent_path();
  if (!step || members.filename() != "members") return std::nullopt;
  return checkpoint_of_lives(members, name, stages, *step);
}

namespace {

// Note "own-part" for a member process: `--resume` names another member's part of a step (one command line
// resumes every rank of loco launch --elastic), and `first_stage` (this member, or its pipeline replica's first
// stage) resumes from its own part of that step. One whose lives wrote parts, but none of that step, starts
// afresh and heals from the others, as a replica thread does. Members named host-pid (LOCO_MEMBER_NAME unset)
// have no parts under their new name: they take the named one, as before, and say so.
void resume_own_part(TrainOptions& options, const std::string& member, const std::string& first_stage) {
  if (!options.resume_from) return;
  const std::filesystem::path named = checkpoint_location(*options.resume_from);
  const std::filesystem::path members = named.parent_path().parent_path().parent_path();
  const std::string named_life = named.parent_path().parent_path().filename().string();
  const std::optional<std::int64_t> step = checkpoint_step(named.filename().string());
  if (!step || members.filename() != "members") return;  // no member's checkpoint
  if (life_of(named_life, first_stage)) return;          // its own
  const int stages = static_cast<int>(options.config.dist.stages);
  if (const std::optional<std::filesystem::path> own = checkpoint_of_lives(members, first_stage, stages, *step)) {
    loco::print_unchecked(stderr, "loco train: member {} resumes from its own part of that step, {}\n", member,
                          own->string());
    options.resume_from = own;
  } else if (checkpoint_of_lives(members, first_stage, stages)) {
    loco::print_unchecked(stderr,
                          "loco train: member {} has no part of {} (its own checkpoints in {} are of other steps): "
                          "it starts afresh and heals from the others\n",
                          member, named.filename().string(), members.string());
    options.resume_from.reset();
  } else {
    loco::print_unchecked(stderr,
                          "loco train: member {} has no checkpoints under its name in {}: it resumes from {}, "
                          "another member's part (set LOCO_MEMBER_NAME to give a member one name in every life)\n",
                          member, members.string(), named.string());
  }
}

// Note "resume-earlier-life": a rank that `loco launch --elastic` started again (its `life`-th process, life > 1)
// goes on from the latest checkpoint its earlier processes wrote, those of `first_stage` (the member whose
// directory holds its replica's checkpoints: itself, or its pipeline replica's first stage). Alone, it is
// behind the others and heals from them all the same; when every rank died at once, the run goes on from their
// checkpoints instead of waiting for a member that holds its progress (coordinator.cpp note
// "no-fresh-restart"). Every stage of a pipeline replica lists the same directories before any of them trains,
// so they take the same step (the resume's checks refuse parts that disagree).
void resume_from_earlier_life(TrainOptions& options, std::int64_t life, const std::string& member,
                              const std::string& first_stage) {
  if (life <= 1) return;
  // Also over a --resume the launcher passes again to every start: the earlier lives went on past its step.
  std::optional<std::filesystem::path> latest = checkpoint_of_lives(
      std::filesystem::path(options.config.train.out_dir) / "members", first_stage, options.config.dist.stages);
  if (!latest) return;
  options.resume_from = std::move(latest);
  const std::string whose =
      member == first_stage ? "its rank" : fmt::format("its replica's first stage, {},", first_stage);
  loco::print_unchecked(
      stderr,
      "loco train: member {} (process {} of its rank) resumes from {}, the latest checkpoint that the "
      "earlier processes of {} wrote\n",
      member, life, options.resume_from->string(), whose);
}

}  // namespace

std::optional<TrainSummary> train_as_member(TrainOptions options, const membership::MemberOptions& member_options,
                                            const std::string& backend, int replica, const MemberStepHook& after_step,
                                            std::int64_t life) {
  const RunConfig& config = options.config;
  if (member_options.place.stages <= 1) {  // a pipeline stage learns its replica's first stage below
    resume_own_part(options, member_options.name, member_options.name);
    resume_from_earlier_life(options, life, member_options.name, member_options.name);
  }
  // Note "graceful-stop": a stop also ends a wait for the coordinator or for a quorum, which can last until
  // comm.timeout_s (the others gone, say), longer than a spot instance's notice. Not a pipeline stage's: its
  // replica's stages stop together, after a step they agreed on.
  membership::MemberOptions stoppable = member_options;
  if (member_options.place.stages <= 1) stoppable.stop_requested = options.stop_requested;
  membership::MemberClient member(stoppable);
  elastic::QuorumGroupOptions group_options;
  group_options.backend = backend;
  group_options.group.timeout = comm_timeout(config.comm);
  group_options.quorum_timeout_s = config.comm.timeout_s;
  // Members do not model a link (their group changes size), so comm.round_kib = auto sizes rounds from what
  // each group's exchanges measure (note "measured-link"): a new group starts unpaced.
  group_options.group.round_size = comm::RoundSize::parse(config.comm.round_kib, "comm.round_kib");
  elastic::QuorumGroup groups(member, group_options);
  // A pipeline stage meets its replica's other stages first (coordinator.h note "pipeline-units").
  std::unique_ptr<comm::Group> pipeline;
  std::string directory_member;
  if (member_options.place.stages > 1) {
    const membership::PipelineReply replica_members = member.await_pipeline(config.comm.timeout_s);
    pipeline = groups.pipeline_group(replica_members, member_options.place.stage,
                                     pipeline_group_options(config, options.stop_requested));
    options.pipeline = pipeline.get();
    directory_member = replica_members.members.front();
    const std::string first_stage = directory_member.substr(0, directory_member.find('#'));
    resume_own_part(options, member_options.name, first_stage);
    resume_from_earlier_life(options, life, member_options.name, first_stage);
    loco::print_unchecked(stderr, "loco train: member {} is stage {} of pipeline replica {} ({})\n",
                          member.credentials().member_id, member_options.place.stage, member_options.place.unit,
                          fmt::join(replica_members.members, ", "));
  }
  // Note "stage-agreement": the stages of a replica settle each outer step alike; NoLoCo has no vote to settle.
  comm::Group* replica_stages =
      pipeline && algorithm_named(config.dist.algorithm) != Algorithm::noloco ? pipeline.get() : nullptr;
  elastic::QuorumMembership membership(groups, member, static_cast<std::uint64_t>(config.replica_batch()),
                                       config.comm.timeout_s, replica, directory_member, replica_stages);
  options.membership = &membership;
  options.make_strategy = [&membership](const RunConfig& c, const ReplicaContext& context) {
    return elastic::make_elastic_strategy(c, context, membership);
  };
  options.on_metrics = [&member](const nlohmann::json& record) { member.report(record); };
  options.communication_stats = [&groups] { return groups.stats(); };
  if (after_step) options.after_step = [&after_step, &member](std::int64_t step) { after_step(step, member); };
  loco::print_unchecked(stderr, "loco train: member {} of elastic run {} (coordinator {}:{})\n",
                        member.credentials().member_id, member_options.run_id, member_options.coordinator.host,
                        member_options.coordinator.port);
  try {
    TrainSummary summary = Trainer(options).run();
    if (summary.stopped_by != 0) {
      // Note "graceful-stop": a member stops alone, after any step, and leaves at once, so that the others
      // form their next quorum without waiting for its heartbeat to expire.
      try {
        member.leave(fmt::format("stopped by {}", signal_name(summary.stopped_by)));
      } catch (const membership::MembershipError& e) {  // the coordinator may be going away too
        loco::print_unchecked(stderr,
                              "loco train: member {} could not tell its coordinator that it leaves ({}); the "
                              "coordinator expires it instead\n",
                              member.credentials().member_id, e.what());
      }
      loco::print_unchecked(stderr, "loco train: member {} left the run after step {}: stopped by {}\n",
                            member.credentials().member_id, summary.steps, signal_name(summary.stopped_by));
      return summary;
    }
    member.leave("finished the run", /*finished=*/true);
    if (summary.steps_trained == 0) {  // it joined at the last synchronisation: nothing was left to train
      loco::print_unchecked(stderr,
                            "loco train: member {} stops: it took the state of step {} from a member that finished the "
                            "run; the final state is in that member's directory\n",
                            member.credentials().member_id, summary.steps);
      return std::nullopt;
    }
    return summary;
  } catch (const membership::RunFinished& e) {
    loco::print_unchecked(stderr, "loco train: member {} stops: {}\n", member.credentials().member_id, e.what());
    return std::nullopt;
  } catch (const std::exception& e) {
    // A stage cannot train without its replica's others, nor rejoin their successors' pipeline: the process
    // fails, and starts again (coordinator.h note "pipeline-units").
    const bool lost_its_replica = dynamic_cast<const comm::CommError*>(&e) != nullptr || member.fenced().has_value();
    if (!pipeline || !lost_its_replica) throw;
    std::string why = e.what();
    while (!why.empty() && why.back() == '.') why.pop_back();
    throw comm::CommError(fmt::format("member {} (stage {} of pipeline replica {}) stops: {}. A stage trains only "
                                      "with its replica's other stages: started again (as loco launch --elastic "
                                      "does), the replica's stages heal from a live replica's",
                                      member.credentials().member_id, member_options.place.stage,
                                      member_options.place.unit, why));
  }
}

namespace {

// The replica a rank of `loco launch --elastic` is (LOCO_MEMBER_NAME=rank-R), for dist.churn.
int churn_replica(const RunConfig& config) {
  const std::string name = environment("LOCO_MEMBER_NAME");
  const auto replica = name.rfind("rank-", 0) == 0 ? parse_whole_number(name.substr(5)) : std::nullopt;
  if (!replica || *replica < 0 || *replica >= static_cast<double>(config.dist.replicas)) {
    throw ConfigError(fmt::format("dist.churn in processes plays the schedule of rank R of `loco launch --elastic` "
                                  "(LOCO_MEMBER_NAME=rank-R, R < dist.replicas = {}), not of member '{}'; run the "
                                  "ranks with loco launch --elastic --nproc {} --max-restarts N (N: the leaves), or "
                                  "use dist.backend = \"local\"",
                                  config.dist.replicas, name, config.dist.replicas));
  }
  return static_cast<int>(*replica);
}

// How far the run has got; nullopt while its coordinator does not answer (one being replaced).
std::optional<membership::RunProgress> progress_of(const membership::CoordinatorAddress& coordinator) {
  try {
    return membership::run_progress(coordinator, 5);
  } catch (const membership::MembershipError&) {
    return std::nullopt;
  }
}

// Waits until the run reaches `step` (a scheduled return): false when it finished first.
bool await_run_step(const membership::CoordinatorAddress& coordinator, std::int64_t step) {
  while (true) {
    if (const auto progress = progress_of(coordinator)) {
      if (progress->finished) return false;
      if (progress->furthest_step >= step) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The pipeline stage this process is (dist.stages > 1): LOCO_PIPELINE (the replica's name) and LOCO_STAGE,
// or from `loco launch --elastic --nproc R*S`'s LOCO_MEMBER_NAME=rank-i: stage i mod S of replica i / S,
// as in a static run's rank layout.
membership::PipelinePlace pipeline_place(const RunConfig& config) {
  const int stages = static_cast<int>(config.dist.stages);
  if (stages <= 1) return {};
  const std::string named = environment("LOCO_PIPELINE"), stage_text = environment("LOCO_STAGE");
  if (!named.empty() || !stage_text.empty()) {
    const auto stage = parse_whole_number(stage_text);
    if (named.empty() || !stage || *stage < 0 || *stage >= stages) {
      throw ConfigError(fmt::format("LOCO_PIPELINE='{}' and LOCO_STAGE='{}' name this process's pipeline replica and "
                                    "its stage: set both, with a stage from 0 to dist.stages - 1 = {}",
                                    named, stage_text, stages - 1));
    }
    return {named, static_cast<int>(*stage), stages};
  }
  const std::string name = environment("LOCO_MEMBER_NAME");
  const auto rank = name.rfind("rank-", 0) == 0 ? parse_whole_number(name.substr(5)) : std::nullopt;
  if (!rank || *rank < 0) {
    throw ConfigError(fmt::format("dist.stages = {} with dist.elastic: each process is one stage of a pipeline "
                                  "replica. Run the ranks with `loco launch --elastic --nproc R*{}` (rank i is stage i "
                                  "mod {} of replica i / {}), or set LOCO_PIPELINE to the replica's name and "
                                  "LOCO_STAGE to the stage for each process (docs/pipeline.md \"Churn\")",
                                  stages, stages, stages, stages));
  }
  // Ranks that do not make whole pipelines would leave the last replica without a stage, and the run's
  // first quorum (which waits for every rank) would never form.
  const auto world = parse_whole_number(environment("WORLD_SIZE"));
  if (world && static_cast<std::int64_t>(*world) % stages != 0) {
    throw ConfigError(fmt::format("dist.stages = {} with dist.elastic: the {} ranks of loco launch --elastic are not "
                                  "whole pipeline replicas of {} stages; start --nproc R*{}",
                                  stages, static_cast<std::int64_t>(*world), stages, stages));
  }
  const auto i = static_cast<std::int64_t>(*rank);
  return {fmt::format("replica-{}", i / stages), static_cast<int>(i % stages), stages};
}

}  // namespace

std::optional<TrainSummary> train_elastic_member(TrainOptions options) {
  // Note "blas-pool": members that `loco launch --elastic --nproc N` started share a machine.
  if (const auto local = parse_whole_number(environment("LOCAL_WORLD_SIZE")); local && *local > 1) {
    limit_blas_threads(options.config.train.threads);
  }
  const std::string address = environment("LOCO_COORDINATOR");
  const std::string run_id = environment("LOCO_RUN_ID");
  if (address.empty() || run_id.empty()) {
    throw ConfigError(
        "dist.elastic = true: set LOCO_COORDINATOR=host:port and LOCO_RUN_ID to the run's coordinator (start it "
        "with `loco coordinator --run-id ID`), or use dist.backend = \"local\" for replicas as threads of this "
        "process (docs/fault-tolerance.md)");
  }
  membership::MemberOptions member_options;
  member_options.coordinator = membership::parse_coordinator_address(address, "LOCO_COORDINATOR");
  member_options.run_id = run_id;
  member_options.name = member_name();
  member_options.place = pipeline_place(options.config);
  // Note "member-settings": the vocabulary as the trainer resolves it from the data, so that a member resumed from
  // a checkpoint (which holds the resolved size) and one started from a config file (0: the data's) agree.
  RunConfig shared = options.config;
  if (shared.model.vocab_size == 0) shared.model.vocab_size = data::read_dataset_meta(shared.data.dir).vocab_size;
  member_options.settings = member_settings_json(shared);
  // data.dir is each member's own, but the tokenizer its data were prepared with must be the run's (a static
  // run's ranks compare it, fixed_membership.cpp): members of two tokenizers trained together without a word.
  member_options.settings["data"]["tokenizer_sha256"] = data::prepared_tokenizer_hash(shared.data.dir);
  // Members may start long before their coordinator (or before its host name resolves): the first join waits
  // as long as any other exchange, saying so every 30 s.
  member_options.join_timeout_s = options.config.comm.timeout_s;
  const std::optional<std::string> secret = membership::run_secret_from_environment();
  if (!secret) {
    throw ConfigError("dist.elastic = true: the member needs the run's secret to join: set LOCO_RUN_SECRET_FILE to "
                      "the file given to `loco coordinator --secret-file` (or LOCO_RUN_SECRET to the secret itself); "
                      "`loco launch --elastic` gives its ranks one (docs/security.md)");
  }
  member_options.secret = *secret;
  const std::int64_t life = parse_whole_number(environment("LOCO_RANK_START")).value_or(1);
  const std::string backend = options.config.dist.backend;
  const RunConfig& config = options.config;
  // dist.adversary and dist.churn name replicas: this member plays rank R of loco launch --elastic.
  const bool numbered = !config.dist.adversary.empty() || !config.dist.churn.empty();
  const int replica = numbered ? churn_replica(config) : -1;
  if (config.dist.churn.empty()) return train_as_member(std::move(options), member_options, backend, replica, {}, life);
  // dist.churn: this rank's n-th process plays its schedule from its n-th life on; a leave is a kill -9
  // (the launcher reports it and starts the rank again), a return waits for the run to reach its step.
  const std::vector<ChurnEvent> schedule =
      parse_churn_schedule(config.dist.churn, config.dist.replicas, config.train.steps);
  const membership::CoordinatorAddress coordinator = member_options.coordinator;
  ChurnPlayer player(
      replica, churn_events_of(schedule, replica),
      [] {
        std::fflush(nullptr);
        std::raise(SIGKILL);
      },
      [coordinator](std::int64_t step) {
        const auto progress = progress_of(coordinator);
        return progress && (progress->finished || progress->furthest_step >= step);
      });
  const int lives_before = life > 1 ? static_cast<int>(life) - 1 : 0;
  if (replica == 0 && lives_before == 0) say_what_was_drawn(config.dist.churn, schedule);
  player.skip_lives(lives_before);
  if (player.gone()) {
    const std::optional<std::int64_t> back = player.take_return();
    if (!back || !await_run_step(member_options.coordinator, *back)) {
      player.say(back ? "does not return: the run finished first" : "has left the run for good");
      return std::nullopt;
    }
    player.say(fmt::format("returns at step {} as a new member", *back));
  }
  return train_as_member(std::move(options), member_options, backend, replica, player.hook(), life);
}

}  // namespace loco::run
