// How large the rounds of a paced exchange are (note "paced-exchange"; docs/slow-links.md, "Pacing").
//
// An all-to-all or all-gather that hands every peer its whole piece at once sends at line rate into
// links that are slower somewhere along the way; over tc-shaped links the receivers' queues overflow,
// TCP loses packets, and the exchange took 1.4–2× its bound (docs/results.md). Cut into rounds of at
// most R bytes per peer, every burst stays small. The `auto` rule sizes R from the link:
//
//   R = max(4 KiB, B/8 · T / (N − 1)),   T = max(8 ms, L / (W_max − 1))
//
// B: the slowest configured bandwidth, L: the highest latency, N: the group's size. A round moves about
// T seconds of traffic over each link. 8 ms is what measured best over tc-shaped links (docs/results.md,
// "Pacing"): 8 KiB per peer at 10 Mbit/s with 2 ranks (6.6 ms), 32 KiB at 100 Mbit/s with 4 ranks
// (7.9 ms); twice or half that was 3–30% slower. No configured bandwidth: B and L are what the group's
// exchanges measured (note "measured-link", link_fit.h); before the first measurement, one round.
//
// Rounds in flight: a round's data reaches its peers a latency after it left, so rounds run strictly one
// after another would each pay L (100 rounds of 8 ms behind 20 ms of latency: 2.8 s for 0.8 s of bytes).
// An exchange therefore keeps up to W rounds started and not yet waited for,
//
//   W = min(W_max, 1 + ⌈L / t⌉),   t = 8 · R · (N − 1) / B   (a round's time on the wire)
//
// enough that the link carries the next rounds while the first ones' latency passes: the exchange then
// pays L about once per phase instead of once per round. W_max bounds the buffers in flight and the
// backend threads that carry them (C10dGroup's Gloo threads); where L would need more, T grows instead.
// Without latency W = 1, the rounds of the measurements above. A fixed size R gets the same W where the
// bandwidth is known (configured or measured), 1 otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loco/comm/link/link_model.h"

namespace loco::comm {

struct RoundSize {
  enum class Mode { whole, fixed, automatic };
  Mode mode = Mode::whole;  // whole: one round, every peer's piece at once
  std::int64_t bytes = 0;   // fixed: per peer and round

  // "auto", "off" (or "0": one round), or a size in KiB ("32", "0.5"). ConfigError naming `key` otherwise.
  static RoundSize parse(const std::string& text, const std::string& key);
  std::string describe() const;  // "auto", "off" or "32 KiB"
};

// The link the auto rule works from: the configured one where it has a bandwidth, else the measured one
// (nullopt: neither).
std::optional<LinkSpec> link_for_rounds(const LinkModel& link, const std::optional<LinkSpec>& measured);

// Bytes per peer and round for an exchange of a group of `group_size` (0: one round). The same on every
// rank that has the same setting, link model and measurement, which is what keeps the ranks' rounds
// matched. `measured` counts only where `link` has no bandwidth.
std::int64_t round_bytes_per_peer(const RoundSize& setting, const LinkModel& link, int group_size,
                                  const std::optional<LinkSpec>& measured = std::nullopt);

// The most rounds an exchange keeps in flight (W_max above).
inline constexpr int kMaxRoundsInFlight = 8;

// W above: how many rounds of an exchange among `group_size` ranks may be started before the first is
// waited for (1: one after another). It changes when the rounds are waited for, not which collectives run
// in which order, so ranks need not agree on it.
int rounds_in_flight(const RoundSize& setting, const LinkModel& link, int group_size,
                     const std::optional<LinkSpec>& measured = std::nullopt);

}  // namespace loco::comm
