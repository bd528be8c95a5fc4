// Codecs that keep each value on its own, without scales: fp32 (a copy) and bf16.
#pragma once

#include <memory>

#include "loco/comm/codecs/codec.h"

namespace loco::comm {

std::unique_ptr<Codec> make_fp32_codec();
std::unique_ptr<Codec> make_bf16_codec();

}  // namespace loco::comm
