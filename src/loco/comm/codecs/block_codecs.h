// Codecs with a per-block absmax scale (layout in block_scaled_codec.h): int8, int4 and fp4.
#pragma once

#include <cstddef>
#include <memory>

#include "loco/comm/codecs/codec.h"

namespace loco::comm {

std::unique_ptr<Codec> make_int8_codec(std::size_t block_size);
std::unique_ptr<Codec> make_int4_codec(std::size_t block_size);
std::unique_ptr<Codec> make_fp4_codec(std::size_t block_size);

}  // namespace loco::comm
