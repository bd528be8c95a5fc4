// Note "overlap-auto" (streaming.overlap_auto; docs/algorithm-reference.md §4 point 2): Streaming DiLoCo's τ,
// the inner steps that run while a fragment's exchange is in flight, chosen from measurements so that the exchange
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
// waits for the slower at the step that applies the exchange, as in DiLoCo, and τ hides the link. It is
// taken up when that exchange is applied (a step every replica agrees on), and used for the fragment's
// exchanges sent from then on, so all replicas apply every exchange at the same step. Simulated replicas
// (dist.backend = "local") behind an emulated link (comm.bandwidth_mbps) measure both on the emulated
// clock, where their link time exists; processes measure wall time: their links are real, and
// comm.bandwidth_mbps there describes the link for pacing and for the first exchanges below.
//
// First exchanges: a fragment has measured nothing when it first sends, and with τ = streaming.overlap
// that exchange stayed exposed (10 Mbit/s: 0.7–1.4 s at each fragment's first application, 1.2–2.5% of a
// 60-step run; docs/results.md). So its E is predicted from what every replica knows alike: another
// fragment's measured E scaled by the bytes (per byte the same link carries them), else 1.4 times the
// ring all-reduce's bound for its encoded bytes on the configured link (comm.bandwidth_mbps, latency_ms),
// else nothing (τ stays streaming.overlap). 1.4: the bound is what no exchange beats; paced rounds take
// 1.1–1.2 times it alone (docs/results.md, "Pacing"), and overlapped with the training's compute on 2
// cores the first exchanges took 1.38–1.41 times it (10 Mbit/s, 2.7 MB in fp4): a prediction short of
// E leaves part of the exchange exposed (τ 2 where 3 was needed: 0.4 s), one a step long applies an
// average one step older for an exchange or two, until the measurements bring τ down. s is each
// replica's median step so far, agreed once per run by an all-gather of one value (the largest; later it
// is the s of the last timing_across). The predicted τ is taken up at the send, by the same rule as a
// measured one, and the first measurement corrects it. Every replica must hold the same
// comm.bandwidth_mbps, as for the rounds' sizes (link/round_size.h): one that predicts and one that
// cannot would not meet at the agreement.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "loco/comm/link/link_model.h"

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

// An exchange whose E was measured (agreed by timing_across), and the bytes each replica encoded for it.
struct MeasuredExchange {
  double exchange_s = 0;
  std::int64_t bytes = 0;
};

// E of an exchange of `bytes` per replica among `group_size` replicas that has not been measured (first
// exchanges above): `measured` scaled to `bytes`, else 1.4 times the ring all-reduce's bound for `bytes`
// on `link` where it has a bandwidth; nullopt when neither is known.
std::optional<double> predicted_exchange_seconds(std::int64_t bytes, int group_size,
                                                 const std::optional<MeasuredExchange>& measured,
                                                 const comm::LinkModel& link);

// The inner steps since the last send: their median is s (robust to a step that also evaluated or saved
// a checkpoint).
class StepDurations {
 public:
  void record(double seconds) { seconds_.push_back(seconds); }
  // The median of the recorded steps (0 if none).
  double median() const;
  // The median, and forgets the steps.
  double take_median();

 private:
  std::vector<double> seconds_;
};

}  // namespace loco
