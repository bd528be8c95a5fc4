// The hash of an elastic member's outer state, θ_g and the outer momentum b, that members vote on after
// an outer step (commit_rules.h) and check a healing transfer against (heal_rules.h): SHA-256 over both
// tensors' bytes, as 64 hex digits. After a commit every member of the quorum holds the same (θ_g, b);
// their inner parameters and AdamW moments differ, which is why only these two are compared.
#pragma once

#include <string>

#include <torch/torch.h>

namespace loco::elastic {

std::string outer_state_digest(const torch::Tensor& global, const torch::Tensor& momentum);

}  // namespace loco::elastic
