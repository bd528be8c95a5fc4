// Chunked, SHA-256-checked state transfer (src/loco/elastic/state_transfer.h) between in-process
// replicas: every size arrives intact on every receiver; a chunk corrupted on its way is refused and sent
// again; a chunk that never arrives intact fails the transfer on every rank alike, and a receiver's bytes
// are left as they were.
#include <gtest/gtest.h>

#include <atomic>

#include "loco/comm/comm_error.h"
#include "loco/comm/local/local_group.h"
#include "loco/elastic/state_transfer.h"

namespace loco::elastic {
namespace {

constexpr std::int64_t kChunk = 64;

std::string payload(std::size_t size) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 131 + 7) % 251);
  return out;
}

TEST(StateTransfer, EverySizeArrivesIntactOnEveryReceiver) {
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t(kChunk - 1), std::size_t(kChunk),
                                 std::size_t(3 * kChunk + 5)}) {
    comm::run_local_replicas(3, [&](comm::Group& group) {
      std::string bytes = group.rank() == 1 ? payload(size) : "stale";
      StateTransferOptions options;
      options.chunk_bytes = kChunk;
      transfer_state(group, bytes, 1, "member b", options);
      EXPECT_EQ(bytes, payload(size)) << "size " << size << " on rank " << group.rank();
    });
  }
}

TEST(StateTransfer, AChunkCorruptedOnItsWayIsSentAgain) {
  std::atomic<int> corrupted{0};
  comm::run_local_replicas(3, [&](comm::Group& group) {
    std::string bytes = group.rank() == 0 ? payload(4 * kChunk) : "";
    StateTransferOptions options;
    options.chunk_bytes = kChunk;
    bool first_try = true;
    options.before_sending = [&](std::int64_t chunk, torch::Tensor& outgoing) {
      if (chunk == 1 && first_try) {
        outgoing.data_ptr<std::uint8_t>()[5] ^= 0x01;  // one bit, after the digest was taken
        first_try = false;
        ++corrupted;
      }
    };
    transfer_state(group, bytes, 0, "member a", options);
    EXPECT_EQ(bytes, payload(4 * kChunk)) << "rank " << group.rank();
  });
  EXPECT_EQ(corrupted.load(), 1);
}

TEST(StateTransfer, AChunkThatNeverArrivesIntactFailsOnEveryRankAndAppliesNothing) {
  std::atomic<int> failed{0};
  comm::run_local_replicas(3, [&](comm::Group& group) {
    std::string bytes = group.rank() == 2 ? payload(3 * kChunk) : "kept";
    StateTransferOptions options;
    options.chunk_bytes = kChunk;
    options.before_sending = [](std::int64_t chunk, torch::Tensor& outgoing) {
      if (chunk == 1) outgoing.data_ptr<std::uint8_t>()[0] ^= 0xff;
    };
    try {
      transfer_state(group, bytes, 2, "member c", options);
      ADD_FAILURE() << "rank " << group.rank() << " accepted a corrupted state";
    } catch (const comm::CommError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("chunk 2 of 3 (bytes 64..128) of the state from member c did not arrive intact in 3 "
                             "tries; the state is not applied"),
                std::string::npos)
          << message;
      ++failed;
    }
    if (group.rank() != 2) {
      EXPECT_EQ(bytes, "kept");
    }
  });
  EXPECT_EQ(failed.load(), 3);  // the sender too: the next synchronisation retries with everyone
}

}  // namespace
}  // namespace loco::elastic
