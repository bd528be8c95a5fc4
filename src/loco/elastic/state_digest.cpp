#include "loco/elastic/state_digest.h"

#include "loco/membership/sha256.h"

namespace loco::elastic {

std::string state_digest(const NamedTensors& tensors) {
  membership::Sha256 hash;
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor host = tensor.to(torch::kCPU).contiguous();
    hash.update(host.data_ptr(), host.numel() * host.element_size());
  }
  return membership::to_hex(hash.digest());
}

}  // namespace loco::elastic
