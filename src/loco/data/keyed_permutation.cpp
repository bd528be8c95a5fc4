#include "loco/data/keyed_permutation.h"

#include "loco/util/error.h"
#include "loco/util/portable_random.h"

namespace loco::data {

KeyedPermutation::KeyedPermutation(std::uint64_t n, std::uint64_t key) : n_(n), half_bits_(1) {
  // 2h bits with 2^(2h) >= n; h = 32 covers every 64-bit n.
  while (half_bits_ < 32 && (std::uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = half_bits_ == 32 ? 0xffffffffULL : (std::uint64_t{1} << half_bits_) - 1;
  for (int r = 0; r < kRounds; ++r) round_keys_[r] = mix_seed(key, static_cast<std::uint64_t>(r));
}

std::uint64_t KeyedPermutation::encrypt(std::uint64_t x) const {
  std::uint64_t left = (x >> half_bits_) & half_mask_, right = x & half_mask_;
  for (const std::uint64_t round_key : round_keys_) {
    const std::uint64_t mixed = left ^ (mix_seed(round_key, right) & half_mask_);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

std::uint64_t KeyedPermutation::operator()(std::uint64_t position) const {
  LOCO_CHECK(position < n_, "position {} of a permutation of {}", position, n_);
  // The cycle through `position` returns to it, so it meets a value below n before that at the latest.
  std::uint64_t x = encrypt(position);
  while (x >= n_) x = encrypt(x);
  return x;
}

}  // namespace loco::data
