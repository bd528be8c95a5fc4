// A run's coordinator and its rendezvous store, served together by this process (docs/fault-tolerance.md
// "The coordinator"): by `loco coordinator`, by `loco launch --elastic` for its ranks, and for the replicas
// of an elastic run as threads (local_elastic_run.h). The store comes first: the coordinator tells the
// members its port. Each has a fresh incarnation. Built with cpp-httplib only (LOCO_HAVE_MEMBERSHIP).
#pragma once

#include "loco/comm/c10d/store_server.h"
#include "loco/membership/coordinator_server.h"

namespace loco::run {

class ServedCoordinator {
 public:
  // `options`' store port and incarnation are filled here; `store_port`: the store's (0: a free one).
  // IoError naming a port that cannot be bound.
  ServedCoordinator(membership::ServerOptions options, int store_port);

  membership::CoordinatorServer& server() { return server_; }
  const membership::ServerOptions& options() const { return options_; }
  int port() const { return server_.port(); }
  int store_port() const { return store_.port(); }

 private:
  static membership::ServerOptions with_store(membership::ServerOptions options, int store_port);

  comm::StoreServer store_;  // first: the server holds its port, and stops before it goes
  membership::ServerOptions options_;
  membership::CoordinatorServer server_;
};

}  // namespace loco::run
