// loco's front door to the run's c10d store (store_server.h; docs/security.md "The run's store"). The store
// of libtorch 1.13 (TCPStore) serves every client from one thread that, once a message has begun, waits for
// the rest of it: one connection that sent 27 bytes of a SET announcing a 256 MiB value made it allocate
// 256 MB and stalled every other client until it closed (issue 35). The store has no options against that,
// so its clients reach it through this front instead:
//
//   - each client connection is served by threads of its own, with a connection of its own to the store;
//   - a message is passed on only once it has arrived whole, so the store never waits for a sender;
//   - a message is read against its framing (the query byte, then 8-byte lengths before keys and values) and
//     refused, closing the connection, as soon as a length announces more than kMaxStoreValueBytes (keys:
//     kMaxStoreKeyBytes; keys in one CHECK or WAIT: kMaxStoreKeysPerQuery), or names no query of the store;
//   - a message must arrive within kStoreMessageDeadlineS of its first byte; between messages a client may
//     wait as long as it likes (a rank waits on keys for minutes);
//   - at most kMaxStoreConnections at once (fewer under a low ulimit -n): beyond it a connection is closed at once.
//
// The store's answers are passed back as they come. No libtorch here: only the wire format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace loco::comm {

inline constexpr std::size_t kMaxStoreKeyBytes = 4096;               // loco's keys are a few dozen bytes
inline constexpr std::size_t kMaxStoreValueBytes = 4 * 1024 * 1024;  // Gloo's addresses are a few hundred
inline constexpr std::size_t kMaxStoreKeysPerQuery = 4096;
inline constexpr double kStoreMessageDeadlineS = 10;
inline constexpr std::size_t kMaxStoreConnections = 1024;
// Fewer when the process's descriptors (ulimit -n) cannot hold three per connection beside the
// kDescriptorsBesideTheStore the rest of it may need; a limit that leaves room for fewer than
// kLeastStoreConnections is refused when the front starts.
inline constexpr std::uint64_t kDescriptorsBesideTheStore = 64;
inline constexpr std::uint64_t kLeastStoreConnections = 8;

class StoreFront {
 public:
  // Listens on `port` of every interface (0: a free port) and passes what arrives whole to the store on
  // 127.0.0.1:`store_port`. CommError naming the port when it cannot listen.
  StoreFront(int port, int store_port);
  ~StoreFront();  // stops accepting and closes every connection
  StoreFront(const StoreFront&) = delete;
  StoreFront& operator=(const StoreFront&) = delete;

  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loco::comm
