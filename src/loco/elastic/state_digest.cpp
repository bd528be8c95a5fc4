#include "loco/elastic/state_digest.h"

#include "loco/membership/sha256.h"

namespace loco::elastic {

std::string outer_state_digest(const torch::Tensor& global, const torch::Tensor& momentum) {
  membership::Sha256 hash;
  for (const torch::Tensor& t : {global, momentum}) {
    const torch::Tensor host = t.to(torch::kCPU).contiguous();
    hash.update(host.data_ptr(), host.numel() * host.element_size());
  }
  return membership::to_hex(hash.digest());
}

}  // namespace loco::elastic
