// Reading a run's status from its coordinator (GET /status): how far the run has got (anyone may ask; a
// member started late uses it), and what an operator reads while it trains (docs/fault-tolerance.md
// "Watching a run"): the full status, asked for with the status token (authentication.h) that the run's
// secret gives, and the same as a terminal table (`loco status`).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "loco/membership/member_client.h"

namespace loco::membership {

// How far a run has got, as its coordinator at `at` says (GET /status; no membership needed): the furthest
// step a member asked for a quorum at, and whether a member finished the run. MembershipError (unavailable)
// when it does not answer within `timeout_s`.
struct RunProgress {
  std::int64_t furthest_step = 0;
  bool finished = false;
};
RunProgress run_progress(const CoordinatorAddress& at, double timeout_s);

// GET /status at `at` with the status token of `secret` for the run the coordinator serves (its id read
// from its public status first). MembershipError: unavailable when it does not answer within `timeout_s`,
// unauthenticated when it does not take the token (another run's secret).
nlohmann::json run_status(const CoordinatorAddress& at, const std::string& secret, double timeout_s);

// The status as text: the run's line, one row per member (id, health, step, loss and tokens/s as it last
// reported them, quorum, last heartbeat, member for), and the last `events` events. Every text from the coordinator is shown escaped (untrusted_text.h).
std::string format_status(const nlohmann::json& status, std::size_t events);

}  // namespace loco::membership
