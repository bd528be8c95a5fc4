// DDP's buckets (docs/algorithm-reference.md §8): parameters are taken in reverse order (the order backward
// produces their gradients) and packed into buckets of at most `first_cap_bytes` for the first
// bucket and `cap_bytes` for the others. A bucket is a contiguous slice of one flat gradient buffer
// (note "flat-parameters"), so it is all-reduced in place with no copy; each buffer has its own open
// bucket, and buckets are numbered in the order they were opened, which is the launch order on
// every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "loco/train/flat_parameters.h"

namespace loco {

struct GradientBucket {
  std::size_t group;     // flat buffer
  std::int64_t offset;   // first element in that buffer
  std::int64_t numel;
  std::vector<std::size_t> parameters;  // indices into FlatParameters::slots()
};

std::vector<GradientBucket> make_gradient_buckets(const FlatParameters& parameters, std::int64_t element_bytes,
                                                  double first_cap_bytes, double cap_bytes);

}  // namespace loco
