// A rendezvous store served by a process that is not a rank: `loco coordinator` serves the one store of an
// elastic run, because a store on a rank that dies takes every client down at once (measured on libtorch
// 1.13: client calls fail within 1 ms and do not reconnect; docs/fault-tolerance.md). Ranks reach it with
// C10dOptions::rank0_serves_store = false and a store_prefix per quorum. Clients reach c10d's store through
// loco's front (store_front.h), which passes on only whole messages of bounded size: the store itself, on a
// port of its own, would wait for a half-sent one with every other client stalled.
#pragma once

#include <memory>

namespace loco::comm {

class StoreServer {
 public:
  // Serves on `port` of every interface (0: a free port). CommError naming the port when it cannot.
  explicit StoreServer(int port);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loco::comm
