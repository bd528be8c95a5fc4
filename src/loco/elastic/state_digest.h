// The hash of an elastic member's outer state, θ_g and the outer momentum b of every fragment, that
// members vote on after an outer step (commit_rules.h) and check a healing transfer against
// (heal_rules.h): SHA-256 over the tensors' bytes in order (names are not hashed), as 64 hex digits.
// After a commit every member of the quorum holds the same (θ_g, b); their inner parameters and AdamW
// moments differ, which is why only these are compared.
#pragma once

#include <string>

#include "loco/io/safetensors.h"

namespace loco::elastic {

std::string outer_state_digest(const NamedTensors& outer_state);

}  // namespace loco::elastic
