// Fuzz target: the header of a safetensors file (io/safetensors_header.h), as checkpoints, exports and the
// states replicas send each other (replica_state.h) bring it. decode_safetensors copies every byte range the
// parser accepts into a tensor of the accepted dtype and shape, so each range must lie inside the input and
// hold exactly that many bytes.
#include <cstring>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "loco/io/safetensors_header.h"
#include "loco/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using loco::fuzz::fuzz_require;
  try {
    const loco::SafetensorsHeader header = loco::parse_safetensors_header(data, size, "fuzz.safetensors");
    for (const auto& tensor : header.tensors) {
      fuzz_require(tensor.begin <= tensor.end && header.data + tensor.end <= data + size,
                   "an accepted tensor lies inside the file");
      std::uint64_t bytes = loco::safetensors_element_size(tensor.dtype);
      for (std::int64_t d : tensor.shape) bytes *= static_cast<std::uint64_t>(d);
      fuzz_require(bytes == tensor.end - tensor.begin, "an accepted tensor's bytes match its dtype and shape");
      // The copy decode_safetensors makes: AddressSanitizer checks every byte of it.
      std::vector<std::uint8_t> copy(bytes);
      if (bytes > 0) std::memcpy(copy.data(), header.data + tensor.begin, bytes);
    }
  } catch (const loco::CheckpointError&) {
  }
  return 0;
}
