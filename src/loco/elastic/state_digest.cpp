#include "loco/elastic/state_digest.h"

#include "loco/membership/sha256.h"

namespace loco::elastic {

std::string outer_state_digest(const NamedTensors& outer_state) {
  membership::Sha256 hash;
  for (const auto& [name, tensor] : outer_state) {
    const torch::Tensor host = tensor.to(torch::kCPU).contiguous();
    hash.update(host.data_ptr(), host.numel() * host.element_size());
  }
  return membership::to_hex(hash.digest());
}

}  // namespace loco::elastic
