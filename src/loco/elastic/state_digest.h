// The hash elastic members compare (commit_rules.h, heal_rules.h): SHA-256 over the tensors' bytes in
// order (names are not hashed), as 64 hex digits. DiLoCo-style members compare their outer state, θ_g and
// the outer momentum b of every fragment (after a commit every member of the quorum holds the same; their
// inner parameters and AdamW moments differ); data parallel members compare their parameters, which are
// all alike.
#pragma once

#include <string>

#include "loco/io/safetensors.h"

namespace loco::elastic {

std::string state_digest(const NamedTensors& tensors);

}  // namespace loco::elastic
