#include "loco/algo/gradient_buckets.h"

#include <optional>

namespace loco {

std::vector<GradientBucket> make_gradient_buckets(const FlatParameters& parameters, std::int64_t element_bytes,
                                                  double first_cap_bytes, double cap_bytes) {
  std::vector<GradientBucket> buckets;
  std::vector<std::optional<std::size_t>> open(parameters.groups());  // open bucket per buffer
  const auto& slots = parameters.slots();
  for (std::size_t i = slots.size(); i-- > 0;) {
    const auto& slot = slots[i];
    std::int64_t numel = 1;
    for (auto s : slot.sizes) numel *= s;
    auto& current = open[slot.group];
    if (current) {
      GradientBucket& b = buckets[*current];
      const double cap = *current == 0 ? first_cap_bytes : cap_bytes;
      // A bucket always takes one parameter, however large; it closes when the next would overflow it.
      if (static_cast<double>((b.numel + numel) * element_bytes) > cap) current.reset();
    }
    if (!current) {
      current = buckets.size();
      buckets.push_back(GradientBucket{slot.group, slot.offset + numel, 0, {}});
    }
    GradientBucket& b = buckets[*current];
    // Reverse order within a buffer: each parameter ends where the bucket begins.
    b.offset = slot.offset;
    b.numel += numel;
    b.parameters.push_back(i);
  }
  return buckets;
}

}  // namespace loco
