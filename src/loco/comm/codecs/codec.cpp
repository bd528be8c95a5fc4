#include "loco/comm/codecs/codec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "loco/comm/codecs/block_codecs.h"
#include "loco/comm/codecs/float_codecs.h"
#include "loco/util/error.h"

namespace loco::comm {

double worst_error_in_block(const Codec& codec, double block_absmax) {
  double worst = 0;
  for (int step = 0; step <= 1024; ++step) {
    worst = std::max(worst, codec.error_bound(block_absmax * step / 1024.0, block_absmax));
  }
  return worst;
}

std::vector<std::string> codec_names() { return {"fp32", "bf16", "int8", "fp4", "int4"}; }

std::unique_ptr<Codec> make_codec(std::string_view name, std::size_t block_size) {
  if (block_size == 0 || block_size > kMaxCodecBlockSize) {
    throw ConfigError(fmt::format("codec block size must be from 1 to {} values per scale (got {}); 128 is the default",
                                  kMaxCodecBlockSize, block_size));
  }
  if (name == "fp32") return make_fp32_codec();
  if (name == "bf16") return make_bf16_codec();
  if (name == "int8") return make_int8_codec(block_size);
  if (name == "fp4") return make_fp4_codec(block_size);
  if (name == "int4") return make_int4_codec(block_size);
  throw ConfigError(fmt::format("unknown codec '{}'; use one of {}.", name, fmt::join(codec_names(), ", ")));
}

}  // namespace loco::comm
