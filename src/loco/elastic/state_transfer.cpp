#include "loco/elastic/state_transfer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "loco/comm/comm_error.h"
#include "loco/membership/sha256.h"
#include "loco/util/print_unchecked.h"

namespace loco::elastic {
namespace {

using membership::Sha256Digest;
constexpr std::int64_t kDigestBytes = 32;

Sha256Digest digest_of(const void* data, std::int64_t size) {
  return membership::Sha256().update(data, static_cast<std::size_t>(size)).digest();
}

Sha256Digest digest_at(const torch::Tensor& digests, std::int64_t index) {
  Sha256Digest out;
  std::memcpy(out.data(), digests.data_ptr<std::uint8_t>() + index * kDigestBytes, kDigestBytes);
  return out;
}

}  // namespace

void transfer_state(comm::Group& group, std::string& bytes, int root, const std::string& sender,
                    const StateTransferOptions& options) {
  const bool sending = group.rank() == root;
  torch::Tensor header = torch::zeros({3}, torch::kInt64);
  if (sending) {
    const auto size = static_cast<std::int64_t>(bytes.size());
    header[0] = size;
    header[1] = options.chunk_bytes;
    header[2] = (size + options.chunk_bytes - 1) / options.chunk_bytes;
  }
  group.broadcast(header, root);
  const std::int64_t size = header[0].item<std::int64_t>(), chunk_bytes = header[1].item<std::int64_t>(),
                     chunks = header[2].item<std::int64_t>();
  if (size < 0 || chunk_bytes <= 0 || chunks != (size + chunk_bytes - 1) / chunk_bytes) {
    throw comm::CommError(fmt::format("the state header from {} is malformed (size {}, chunk {}, {} chunks); nothing "
                                      "is applied",
                                      sender, size, chunk_bytes, chunks));
  }
  // Digest 0: the whole state; digest 1 + i: chunk i.
  torch::Tensor digests = torch::zeros({(chunks + 1) * kDigestBytes}, torch::kUInt8);
  const auto chunk_span = [&](std::int64_t i) {
    const std::int64_t begin = i * chunk_bytes;
    return std::make_pair(begin, std::min(size, begin + chunk_bytes) - begin);
  };
  if (sending) {
    const auto put = [&](std::int64_t index, const Sha256Digest& d) {
      std::memcpy(digests.data_ptr<std::uint8_t>() + index * kDigestBytes, d.data(), kDigestBytes);
    };
    put(0, digest_of(bytes.data(), size));
    for (std::int64_t i = 0; i < chunks; ++i) {
      const auto [begin, length] = chunk_span(i);
      put(1 + i, digest_of(bytes.data() + begin, length));
    }
  }
  group.broadcast(digests, root);

  std::string received(sending ? 0 : static_cast<std::size_t>(size), '\0');
  torch::Tensor bad = torch::zeros({1}, torch::kInt64);
  for (std::int64_t i = 0; i < chunks; ++i) {
    const auto [begin, length] = chunk_span(i);
    for (int attempt = 1;; ++attempt) {
      torch::Tensor chunk;
      if (sending) {
        chunk = torch::empty({length}, torch::kUInt8);
        std::memcpy(chunk.data_ptr(), bytes.data() + begin, static_cast<std::size_t>(length));
        if (options.before_sending) options.before_sending(i, chunk);
      } else {
        chunk = torch::from_blob(received.data() + begin, {length}, torch::kUInt8);
      }
      group.broadcast(chunk, root);
      const bool intact = sending || digest_of(chunk.data_ptr(), length) == digest_at(digests, 1 + i);
      bad.fill_(intact ? 0 : 1);
      group.all_reduce(bad);
      const std::int64_t failed = bad.item<std::int64_t>();
      if (failed == 0) break;
      const std::string what = fmt::format("chunk {} of {} (bytes {}..{}) of the state from {}", i + 1, chunks, begin,
                                           begin + length, sender);
      if (attempt >= options.tries_per_chunk) {
        throw comm::CommError(fmt::format("{} did not arrive intact in {} tries; the state is not applied", what,
                                          attempt));
      }
      if (!intact) {
        loco::print_unchecked(stderr,
                              "elastic: {} does not match its SHA-256; refused, asking for it again (try {} of {})\n",
                              what, attempt + 1, options.tries_per_chunk);
      } else if (sending) {
        loco::print_unchecked(stderr, "elastic: {} member(s) refused {}; sending it again\n", failed, what);
      }
    }
  }
  if (sending) return;
  if (digest_of(received.data(), size) != digest_at(digests, 0)) {
    throw comm::CommError(fmt::format("the state from {} ({} bytes) does not match its SHA-256 although every chunk "
                                      "did; it is not applied",
                                      sender, size));
  }
  bytes = std::move(received);
}

}  // namespace loco::elastic
