// How large the rounds of a paced exchange are (note "paced-exchange"; docs/slow-links.md, "Pacing").
//
// An all-to-all or all-gather that hands every peer its whole piece at once sends at line rate into
// links that are slower somewhere along the way; over tc-shaped links the receivers' queues overflow,
// TCP loses packets, and the exchange took 1.4–2× its bound (docs/results.md). Cut into rounds of at
// most R bytes per peer, run one after another, every burst stays small. But each round waits for the
// slowest peer and costs one latency, so R is a trade, and the `auto` rule makes it from the link:
//
//   R = max(4 KiB, B/8 · T / (N − 1)),   T = max(8 ms, L / 0.05)
//
// B: the slowest configured bandwidth, L: the highest latency, N: the group's size. A round moves about
// T seconds of traffic over each link: short enough to keep bursts small, long enough that its latency
// is at most 5% of it. 8 ms is what measured best over tc-shaped links (docs/results.md, "Pacing"):
// 8 KiB per peer at 10 Mbit/s with 2 ranks (6.6 ms), 32 KiB at 100 Mbit/s with 4 ranks (7.9 ms); twice
// or half that was 3–30% slower. No configured bandwidth: B and L are what the group's exchanges measured
// (note "measured-link", link_fit.h); before the first measurement, one round.
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

// Bytes per peer and round for an exchange of a group of `group_size` (0: one round). The same on every
// rank that has the same setting, link model and measurement, which is what keeps the ranks' rounds
// matched. `measured` counts only where `link` has no bandwidth.
std::int64_t round_bytes_per_peer(const RoundSize& setting, const LinkModel& link, int group_size,
                                  const std::optional<LinkSpec>& measured = std::nullopt);

}  // namespace loco::comm
