// A keyed pseudo-random permutation of 0 .. n-1 that is computed, not stored: the order of an epoch's
// windows in O(1) memory, whatever the corpus size (note "keyed-order").
//
// A balanced Feistel network over 2h bits, 2^(2h) the smallest such domain holding n: the index is split
// into halves (L, R) and each of kRounds rounds maps (L, R) to (R, L xor F_k(R)), with F_k a SplitMix64
// mix of R and the round's key (util/portable_random.h); any F gives a bijection of the domain, and with
// a pseudo-random F four rounds already give a pseudo-random permutation (Luby-Rackoff). Indices at or
// above n are walked along their cycle until they fall below n ("cycle walking"), which restricts the
// bijection to 0 .. n-1; the domain is at most 4n, so a lookup takes at most a few rounds of walking on
// average. Portable: the same key gives the same order on every platform.
#pragma once

#include <array>
#include <cstdint>

namespace loco::data {

class KeyedPermutation {
 public:
  KeyedPermutation(std::uint64_t n, std::uint64_t key);

  // The position-th element of the permutation (position < n).
  std::uint64_t operator()(std::uint64_t position) const;
  std::uint64_t size() const { return n_; }

 private:
  static constexpr int kRounds = 6;
  std::uint64_t encrypt(std::uint64_t x) const;

  std::uint64_t n_;
  int half_bits_;
  std::uint64_t half_mask_;
  std::array<std::uint64_t, kRounds> round_keys_{};
};

}  // namespace loco::data
