#include "loco/run/local_elastic_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <exception>
#include <mutex>
#include <thread>

#include "loco/config/churn_schedule.h"
#include "loco/config/load_config.h"
#include "loco/membership/run_secret.h"
#include "loco/run/churn_player.h"
#include "loco/run/elastic_member_run.h"
#include "loco/run/served_coordinator.h"
#include "loco/train/checkpoint.h"
#include "loco/train/resume_checks.h"
#include "loco/train/run_directory.h"
#include "loco/train/runtime.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/run_on_threads.h"

namespace loco::run {
namespace {

// The coordinator's rules for replicas on one machine: a stalled replica is given up after 1 s without
// heartbeats, and the others wait up to 30 s for a replica that is healthy but late at a synchronisation:
// threads of one process are late only because they share the cores, and a simulated run should lose
// members to its schedule alone (with a 0.5 s window, 3 threads on 2 cores left a straggler behind in 5 of
// 20 outer steps of a run without churn). Any replica may go on alone (min_replicas 1); the first quorum
// waits for all of them.
constexpr double kHeartbeatTimeoutS = 1.0;
constexpr double kJoinWindowS = 30;

// Thrown from the step hook of a replica whose schedule says it leaves now; caught by its thread.
struct ReplicaLeaves {};

// What the replica threads share: how far the run has got, and who still trains.
class Progress {
 public:
  // Every replica counts as training from the start, so that a replica that leaves before the others'
  // threads are under way does not find the run empty.
  explicit Progress(int replicas) : training_(replicas) {}
  void reached(std::int64_t step) {
    std::lock_guard<std::mutex> lock(mutex_);
    furthest_ = std::max(furthest_, step);
    changed_.notify_all();
  }
  void starts() { change([this] { ++training_; }); }
  void stops(bool finished) {
    change([this, finished] {
      --training_;
      finished_ = finished_ || finished;
    });
  }
  // Waits until some replica reached `step`; false (at once) when the run finished or nobody trains.
  bool await_step(std::int64_t step) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return furthest_ >= step || finished_ || training_ == 0; });
    return furthest_ >= step && !finished_;
  }
  std::int64_t furthest() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return furthest_;
  }
  // Whether some replica reached `step` or finished the run.
  bool reached_or_finished(std::int64_t step) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return furthest_ >= step || finished_;
  }

 private:
  template <typename F>
  void change(F f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f();
    changed_.notify_all();
  }
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t furthest_ = 0;
  int training_;
  bool finished_ = false;
};

// Note "threads-resume" (note "own-part", elastic_member_run.h): replica r resumes from its own part of the step
// a resume names (OUT/members/replica-0-1/checkpoints/step_N, as a stop's advice prints it). One without starts
// afresh and heals from the others, except replica 0, which then takes the named one (a checkpoint of another
// kind of member).
std::optional<std::filesystem::path> own_checkpoint(const TrainOptions& options, int r) {
  if (!options.resume_from) return std::nullopt;
  const std::filesystem::path named = checkpoint_location(*options.resume_from);
  const std::optional<std::filesystem::path> own =
      own_part_of(named, fmt::format("replica-{}", r), static_cast<int>(options.config.dist.stages));
  if (own || r == 0) {
    if (r > 0 || own != named)
      loco::print_unchecked(stderr, "replica-{} resumes from {}\n", r, (own ? *own : named).string());
    return own ? own : named;
  }
  loco::print_unchecked(stderr, "replica-{} has no checkpoint of {}: it starts afresh and heals from the others\n", r,
                        named.filename().string());
  return std::nullopt;
}

// Replica `r`: trains as member "replica-r", takes its schedule's stalls and leaves from the step hook,
// and after a leave waits for its return, then joins again as a new member (which heals).
std::optional<TrainSummary> run_replica(int r, const TrainOptions& options, const std::vector<ChurnEvent>& events,
                                        const membership::MemberOptions& coordinator, Progress& progress) {
  ChurnPlayer player(
      r, events, [] { throw ReplicaLeaves{}; },
      [&progress](std::int64_t step) { return progress.reached_or_finished(step); });
  const MemberStepHook take_events = [&progress, play = player.hook()](std::int64_t step,
                                                                       membership::MemberClient& member) {
    progress.reached(step);
    play(step, member);
  };
  membership::MemberOptions member_options = coordinator;
  member_options.name = fmt::format("replica-{}", r);
  TrainOptions mine = options;
  mine.quiet = options.quiet || r != 0;  // one progress line per step is enough
  mine.resume_from = own_checkpoint(options, r);
  for (bool first = true;; first = false) {
    if (!first) {
      progress.starts();
      mine.resume_from.reset();  // back as a new member, which heals from the others
    }
    try {
      std::optional<TrainSummary> summary = train_as_member(mine, member_options, "gloo", r, take_events);
      progress.stops(/*finished=*/!summary || summary->stopped_by == 0);
      return summary;
    } catch (const ReplicaLeaves&) {
      progress.stops(/*finished=*/false);
    } catch (const membership::MembershipError& e) {
      progress.stops(/*finished=*/false);
      if (e.refusal() != membership::Refusal::barred) throw;
      // The coordinator removed it for its rejected pseudo-gradients (dist.adversary): the others go on.
      player.say(fmt::format("was removed from the run: {}", e.what()));
      return std::nullopt;
    } catch (...) {
      progress.stops(/*finished=*/false);
      throw;
    }
    const std::optional<std::int64_t> back = player.take_return();
    if (!back) return std::nullopt;  // gone for good
    if (!progress.await_step(*back)) {
      player.say(fmt::format("does not return at step {}: the run finished, or no replica is left to reach it", *back));
      return std::nullopt;
    }
    player.say(fmt::format("returns at step {} as a new member", progress.furthest()));
  }
}

}  // namespace

TrainSummary train_local_elastic(const TrainOptions& options) {
  const RunConfig& config = options.config;
  const int replicas = static_cast<int>(config.dist.replicas);
  const std::vector<ChurnEvent> schedule =
      parse_churn_schedule(config.dist.churn, config.dist.replicas, config.train.steps);
  say_what_was_drawn(config.dist.churn, schedule);
  membership::ServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.port = 0;
  server_options.coordinator.run_id = fmt::format("local-{}", ::getpid());
  server_options.coordinator.rules.min_replicas = 1;
  server_options.coordinator.rules.start_replicas = replicas;
  server_options.coordinator.rules.heartbeat_timeout_s = kHeartbeatTimeoutS;
  server_options.coordinator.rules.join_window_s = kJoinWindowS;
  server_options.coordinator.run_steps = config.train.steps;
  server_options.log = [](const std::string&) {};  // the members log what matters to a run
  server_options.secret = membership::new_run_secret();  // a run of this process's own
  ServedCoordinator served(server_options, 0);
  membership::CoordinatorServer& server = served.server();
  server.start();
  if (!options.quiet) served.show_dashboard_link("127.0.0.1", "loco train");
  membership::MemberOptions coordinator;
  coordinator.coordinator = {"127.0.0.1", server.port()};
  coordinator.run_id = server_options.coordinator.run_id;
  coordinator.secret = server_options.secret;
  coordinator.settings = member_settings_json(config);

  // A checkpoint of the other kind (a static run's) is refused once, before any replica starts.
  if (options.resume_from) require_part_for(config, *options.resume_from, 0, 0);
  if (replicas > 1) limit_blas_threads(config.train.threads);  // note "blas-pool"
  Progress progress(replicas);
  std::vector<std::optional<TrainSummary>> summaries(static_cast<std::size_t>(replicas));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(replicas));
  // A replica that fails ends the others' run as a signal would: they waited for it in their quorums until
  // comm.timeout_s (10 minutes by default) before the failure was said.
  std::atomic<bool> failed{false};
  TrainOptions stoppable = options;
  stoppable.stop_requested = [&failed, given = options.stop_requested] {
    const int signal = given ? given() : 0;
    return signal != 0 ? signal : (failed ? SIGTERM : 0);
  };
  run_on_threads(
      replicas,
      [&](int r) {
        try {
          summaries[static_cast<std::size_t>(r)] =
              run_replica(r, stoppable, churn_events_of(schedule, r), coordinator, progress);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
          failed = true;
        }
      },
      // The replicas running would go on without those that never started: without their coordinator they
      // stop within comm.timeout_s instead.
      [&](int) { server.stop(); }, "dist.replicas");
  server.stop();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  // A run stopped by a signal says so (and ends as stopped) whichever replica finished.
  for (const auto& s : summaries) {
    if (s && s->stopped_by != 0) return *s;
  }
  for (const auto& s : summaries) {
    if (s) return *s;
  }
  throw Error("no replica finished the run: every replica left (dist.churn) before the last step");
}

}  // namespace loco::run
