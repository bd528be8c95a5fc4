// Simulated churn (docs/fault-tolerance.md "Simulated churn"): the faults of an elastic run whose
// replicas are threads of one process (dist.elastic = true, dist.backend = "local"), written in
// dist.churn as events separated by commas:
//
//   R@S:leave      replica R leaves the run right after its optimizer step S (it tells the coordinator)
//   R@T:return     replica R, gone since its last leave, joins again as a new member once some replica has
//                  reached step T, and heals from the others at their next synchronisation
//   R@S:stall=K    replica R stops for K seconds right after step S, heartbeats too (a hang: the others
//                  go on without it once its heartbeat expires; it then rejoins by itself and heals)
//   R@S:stall-until=T
//                  the same hang, lasting until some replica has reached step T > S (or the run ended):
//                  the others get to T only by going on without it, so it is certain to find them ahead
//                  when it comes back, however fast they train (timed stalls depend on the machine)
//
// for example "2@40:leave, 2@80:return, 1@60:stall=3". Replicas count from 0. A replica that healed past
// an event's step S takes it after its first step past S. Or seeded random faults:
//
//   random:SEED[:FAULTS]   FAULTS faults (default: one per replica; at most 1000) drawn from SEED: each picks
//                          a replica and a step uniformly, then with even odds a stall of 1–5 s or a leave
//                          with a return at a later step; a fault that would clash with the schedule so far
//                          (two events of a replica at one step, a stall while gone, overlapping absences,
//                          every replica gone at once) is drawn again (up to 100 times, then left out).
//                          Portable: the same schedule on every platform (util/portable_random.h).
//
// Pure data and parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loco {

struct ChurnEvent {
  enum class Kind { leave, rejoin, stall };
  int replica = 0;
  std::int64_t step = 0;
  Kind kind = Kind::leave;
  double seconds = 0;            // stall=K
  std::int64_t until_step = 0;   // stall-until=T (then `seconds` is 0)
};

// The events in the order given (random: by step), for a run of `steps` steps; ConfigError naming the
// event, the expected forms and what is wrong: a malformed event, a replica outside [0, replicas), a step
// < 1, a return without an earlier leave of the same replica (or a second leave before its return), a
// stall while the replica is gone, a stall-until step not after the stall's or past the run's `steps`.
std::vector<ChurnEvent> parse_churn_schedule(const std::string& text, std::int64_t replicas, std::int64_t steps);

// The events in the explicit form ("2@40:leave, 2@80:return, 1@60:stall=3, 0@90:stall-until=120"), which parses back to them:
// what a random schedule drew, to print, edit or replay.
std::string format_churn_schedule(const std::vector<ChurnEvent>& events);

// Replica `replica`'s events, by step (a return at T comes after the leave it ends).
std::vector<ChurnEvent> churn_events_of(const std::vector<ChurnEvent>& schedule, int replica);

}  // namespace loco
