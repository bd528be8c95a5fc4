#include "loco/algo/adversary.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <limits>

#include "loco/util/portable_random.h"

namespace loco {

void corrupt_pseudo_gradient(const std::optional<AdversarySpec>& adversary, torch::Tensor& delta, int rank,
                             std::int64_t step, std::uint64_t seed) {
  if (!adversary || adversary->replica != rank || step <= adversary->from_step) return;
  torch::NoGradGuard no_grad;
  if (adversary->kind == AdversarySpec::Kind::scale) {
    delta.mul_(adversary->factor);
    return;
  }
  if (adversary->kind == AdversarySpec::Kind::nan) {
    delta.fill_(std::numeric_limits<float>::quiet_NaN());
    return;
  }
  auto generator = at::detail::createCPUGenerator(mix_seed(seed, static_cast<std::uint64_t>(step)));
  const torch::Tensor noise = torch::randn(delta.sizes(), generator, delta.options().device(torch::kCPU));
  const double norm = delta.norm().item<double>(), noise_norm = noise.norm().item<double>();
  delta.copy_(noise.mul_(noise_norm > 0 ? norm / noise_norm : 0.0));
}

std::string describe_adversary(const std::optional<AdversarySpec>& adversary) {
  if (!adversary) return "";
  const std::string what = adversary->kind == AdversarySpec::Kind::scale ? fmt::format("scale={}", adversary->factor)
                           : adversary->kind == AdversarySpec::Kind::noise ? "noise"
                                                                            : "nan";
  return fmt::format(" adversary=replica {} after step {}: {}", adversary->replica, adversary->from_step, what);
}

}  // namespace loco
