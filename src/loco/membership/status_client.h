// What an operator reads of a run while it trains (docs/fault-tolerance.md "Watching a run"): the
// coordinator's full status, asked for with the status token (authentication.h) that the run's secret gives,
// and the same as a terminal table. Used by `loco status`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

#include "loco/membership/member_client.h"

namespace loco::membership {

// GET /status at `at` with the status token of `secret` for the run the coordinator serves (its id read
// from its public status first). MembershipError: unavailable when it does not answer within `timeout_s`,
// unauthenticated when it does not take the token (another run's secret).
nlohmann::json run_status(const CoordinatorAddress& at, const std::string& secret, double timeout_s);

// The status as text: the run's line, one row per member (id, health, step, quorum, last heartbeat, member
// for), and the last `events` events. Every text from the coordinator is shown escaped (untrusted_text.h).
std::string format_status(const nlohmann::json& status, std::size_t events);

}  // namespace loco::membership
