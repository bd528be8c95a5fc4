#include <fmt/format.h>

#include <functional>
#include <string>

#include "loco/comm/group.h"
#include "loco/train/divergence.h"
#include "loco/train/trainer.h"
#include "loco/train/trainer_state.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/stop_requested.h"

namespace loco {

// Note "graceful-stop": a signal (SIGTERM before a spot instance is taken away, Ctrl-C) stops the run at a
// step boundary with a checkpoint of every replica and stage, from which `--resume` continues as if nothing
// had happened. Every replica and stage must stop after the same step: a signal reaches the processes (or
// is seen by the replica threads) at different moments, and a replica a step ahead or behind would wait
// for the others in its next exchange forever. So the ranks agree, with one small gather over their groups
// (the replica group, then the pipeline group: the largest signal number any rank saw), at the steps
// StopChecks names (train/stop_checks.h). A run that is not stopped pays one small gather per outer step and
// per stop_check_every steps, where the replicas briefly wait for each other. An elastic member has no replica
// group (its quorums come and go): it stops alone, after any step, and leaves its quorum
// (run/elastic_member_run.cpp); only a pipeline replica's stages agree.
int Trainer::agreed_stop() {
  State& s = *state_;
  if (!s.options.stop_requested || s.last_step()) return 0;
  if (!s.stop_checks) s.stop_checks.emplace(s.config.train.stop_check_every, s.step - 1);
  const StopChecks::Check check =
      s.stop_checks->at(s.step, s.replicas() == 1, s.strategy->synchronised_at(s.step), s.strategy->exchanging());
  if (check == StopChecks::Check::after_settling) s.strategy->settle_exchanges();  // applied when due all the same
  bool checks_now = check != StopChecks::Check::none;
  // A pipeline replica's stages decide apart (each exchanges its own share and may have it in flight at other
  // steps): they first agree over the pipeline group, where they meet every step anyway, so that the gathers
  // below happen on every stage or on none. Each stage decides alike on every replica, so the agreed answer
  // is every replica's.
  if (s.replicas() > 1 && s.options.pipeline != nullptr && s.options.pipeline->size() > 1) {
    checks_now = s.options.pipeline->smallest_of_ranks(checks_now ? 1 : 0) == 1;
  }
  if (!checks_now) return 0;
  s.stop_checks->checked(s.step);
  std::int64_t signal = s.options.stop_requested();
  for (comm::Group* group : {s.group, s.options.pipeline}) {  // the stage's replicas, then the replica's stages
    if (group != nullptr && group->size() > 1) signal = -group->smallest_of_ranks(-signal);
  }
  return static_cast<int>(signal);
}

void Trainer::note_stop_while_waiting(int signal, const std::string& what) {
  State& s = *state_;
  s.stopped_waiting = signal;
  if (signal == kGaveUpWaiting) s.gave_up = what;
  loco::print_unchecked(stderr, "{}: {}\n", s.membership->describe(), what);
}

bool Trainer::ended_waiting(const std::function<void()>& synchronise) {
  try {
    synchronise();
    return false;
  } catch (const StopRequested& stop) {
    note_stop_while_waiting(stop.signal(), stop.what());
  } catch (const GaveUpWaiting& gave_up) {  // note "gave-up-waiting": checkpointed before the error, as a stop is
    note_stop_while_waiting(kGaveUpWaiting, gave_up.what());
  }
  return true;
}

void Trainer::give_up_waiting() {
  const State& s = *state_;
  throw GaveUpWaiting(fmt::format(
      "{}. {}", s.gave_up,
      s.saved_step == s.step
          ? fmt::format("It wrote a checkpoint of step {} first: resume it from {} once what it waited for is back",
                        s.step, s.summary.last_checkpoint.string())
          : "It stops; " + s.start_again_advice()));
}

}  // namespace loco
