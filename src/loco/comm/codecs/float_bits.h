// The bits of an fp32 value and back (std::bit_cast before C++20): the codecs round by bit pattern.
#pragma once

#include <cstdint>
#include <cstring>

namespace loco::comm {

inline std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

inline float float_of(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace loco::comm
