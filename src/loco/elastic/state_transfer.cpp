#include "loco/elastic/state_transfer.h"

#include <fmt/format.h>

#include <cstring>

#include "loco/comm/comm_error.h"
#include "loco/util/fs.h"

namespace loco::elastic {

void broadcast_bytes(comm::Group& group, std::string& bytes, int root, const std::string& sender) {
  const bool sending = group.rank() == root;
  // Header: size, then the CRC-32 as a number (crc32_hex is 8 hex digits).
  torch::Tensor header = torch::zeros({2}, torch::kInt64);
  if (sending) {
    header[0] = static_cast<std::int64_t>(bytes.size());
    header[1] = static_cast<std::int64_t>(std::stoull(crc32_hex(bytes), nullptr, 16));
  }
  group.broadcast(header, root);
  const std::int64_t size = header[0].item<std::int64_t>();
  torch::Tensor payload = torch::empty({size}, torch::kUInt8);
  if (sending && size > 0) std::memcpy(payload.data_ptr(), bytes.data(), static_cast<std::size_t>(size));
  group.broadcast(payload, root);
  if (sending) return;
  bytes.assign(static_cast<const char*>(payload.data_ptr()), static_cast<std::size_t>(size));
  if (static_cast<std::int64_t>(std::stoull(crc32_hex(bytes), nullptr, 16)) != header[1].item<std::int64_t>()) {
    throw comm::CommError(fmt::format("the state received from {} ({} bytes) does not match its CRC-32; it is "
                                      "not applied",
                                      sender, size));
  }
}

}  // namespace loco::elastic
