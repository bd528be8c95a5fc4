// A simulated bad replica, for studying robust aggregation (docs/algorithms.md "Robust aggregation";
// bench/poisoned.sh): `dist.adversary` names one replica that, from one outer step on, sends a corrupted
// pseudo-gradient instead of its own.
//
//   R@S:scale=F   replica R sends F·Δ after step S (F = 100: a huge one; F = -1: sign-flipped)
//   R@S:noise     replica R sends seeded Gaussian noise with the norm of its Δ after step S
//   R@S:nan       replica R sends NaN after step S (a broken replica)
//
// Replicas count from 0; "" is none. In elastic runs, R is the replica thread (dist.backend = "local") or
// rank R of `loco launch --elastic`. Pure data and parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace loco {

struct AdversarySpec {
  enum class Kind { scale, noise, nan };
  int replica = 0;
  std::int64_t from_step = 0;  // its pseudo-gradients of outer steps after this step are corrupted
  Kind kind = Kind::scale;
  double factor = 1;  // scale only
};

// nullopt for ""; ConfigError naming dist.adversary, the forms and what is wrong (a malformed value, a
// replica outside [0, replicas), a factor that is not a finite number).
std::optional<AdversarySpec> parse_adversary(const std::string& text, std::int64_t replicas);

}  // namespace loco
