// Note "overlap-auto" (streaming.overlap_auto; ALGORITHMS.md §4 point 2): Streaming DiLoCo's τ, the inner
// steps that run while a fragment's exchange is in flight, chosen from measurements so that the exchange
// is hidden and no more. A larger τ hides more but applies an older average (mixed with α): it costs loss,
// so the rule takes the smallest τ that covers the exchange:
//
//     τ_hide = min(τ_max, max(1, ⌈1.1 · E / s⌉)),   τ ← max(τ_hide, τ − 1)
//
//   E      seconds from the moment a replica sends Δ_p until the average is ready on it: the exchange's
//          own time and any exchange queued ahead of it, as the replica that sent last saw them;
//   s      the median inner step of the replica (outside the waits for exchanges) since its last send;
//   1.1    a margin for exchanges that take a little longer than the last one (rounds, jitter);
//   τ_max  streaming.sync_every − 1: a fragment's exchange lands before its next one starts.
//
// τ rises at once but falls one step per exchange: an exchange overlapped with compute is slower the more
// compute it overlaps on a busy CPU (4 ranks on 2 cores: 4.8, 9.1, 12.4 s as τ went 2, 3, 4), and one
// fast exchange dropped τ from 3 to 1 and left the next one exposed.
//
// Each fragment has its own τ, from its own exchanges: fragments differ in size (the one that holds the
// embeddings can take twice as long), and one τ for all swung between them (measured: 2, 3, 2, 4, 2, 3
// at 10 Mbit/s). Every exchange ends with an all-gather of each replica's (E, s), so every replica derives
// the same τ: E is the least of them, s the largest. A replica that sent earlier than the others also
// timed its wait for them, which τ does not hide: where one replica computes more slowly than another
// (measured on this VM's 2 cores: 2 processes drift up to 14% apart, pinned or not), the faster one
// falls further ahead at every exchange, and a τ sized on its E climbed to 4–6 steps for exchanges of
// 0.3 s (docs/results.md, "Where the time goes") while it still waited as long. The faster replica now
// waits for the slower at the step that applies the exchange, as in DiLoCo, and τ hides the link. It is taken up when that exchange is applied (a
// step every replica agrees on), and used for the fragment's exchanges sent from then on, so all
// replicas apply every exchange at the same step. Simulated replicas (dist.backend = "local") behind an
// emulated link (comm.bandwidth_mbps) measure both on the emulated clock, where their link time exists;
// processes measure wall time: their links are real, and comm.bandwidth_mbps there mostly describes the
// link for pacing. Until a fragment's first exchange is applied, its τ is streaming.overlap.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace loco {

namespace comm {
class Group;
}

struct ExchangeTiming {
  double exchange_s = 0;  // E
  double step_s = 0;      // s
};

// τ_hide above (`most` ≥ 1 is τ_max); nullopt when s is unknown (no inner step measured, or a clock that
// does not advance).
std::optional<std::int64_t> overlap_to_hide(const ExchangeTiming& timing, std::int64_t most);
// The τ that follows `current` after an exchange measured `timing`: max(τ_hide, current − 1), or
// `current` when s is unknown.
std::int64_t next_overlap(const ExchangeTiming& timing, std::int64_t current, std::int64_t most);

// The least E and the largest s over the group's replicas (an all-gather of two float64 per replica).
ExchangeTiming timing_across(comm::Group& group, const ExchangeTiming& mine);

// The inner steps since the last send: their median is s (robust to a step that also evaluated or saved
// a checkpoint).
class StepDurations {
 public:
  void record(double seconds) { seconds_.push_back(seconds); }
  // The median of the recorded steps (0 if none), and forgets them.
  double take_median();

 private:
  std::vector<double> seconds_;
};

}  // namespace loco
