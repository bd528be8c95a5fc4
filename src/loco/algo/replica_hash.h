// The debug check of dist.check_sync (docs/algorithm-reference.md §10: "compare a hash of θ_g across replicas after
// every outer step"): replicas that should hold identical global parameters but do not have
// diverged silently (a wrong schedule step after a restore, fragments reduced in another order).
#pragma once

#include <string>

#include "loco/comm/group.h"

namespace loco {

// FNV-1a of the tensor's bytes (host, contiguous).
std::uint64_t tensor_hash(const torch::Tensor& tensor);

// All-gathers tensor_hash(tensor) and throws InternalError naming the replicas that differ from
// replica 0 and `what` (e.g. "global parameters after outer step 12").
void require_identical_across_replicas(comm::Group& group, const torch::Tensor& tensor, const std::string& what);

}  // namespace loco
