// A run's coordinator and its rendezvous store, served together by this process (docs/fault-tolerance.md
// "The coordinator"): by `loco coordinator`, by `loco launch --elastic` for its ranks, and for the replicas
// of an elastic run as threads (local_elastic_run.h). The store comes first: the coordinator tells the
// members its port. Each has a fresh incarnation. Built with cpp-httplib only (LOCO_HAVE_MEMBERSHIP).
#pragma once

#include <string>

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

  // The dashboard's address with its status token, for the operator at this terminal only: written to
  // /dev/tty, never to stdout or stderr, which a launcher or a service manager may keep in a log file (the
  // token reads the members' names and metrics). `host`: how the operator reaches this machine; `who` starts
  // the line ("loco coordinator"). False when this process has no terminal.
  bool show_dashboard_link(const std::string& host, const std::string& who) const;

 private:
  static membership::ServerOptions with_store(membership::ServerOptions options, int store_port);

  comm::StoreServer store_;  // first: the server holds its port, and stops before it goes
  membership::ServerOptions options_;
  membership::CoordinatorServer server_;
};

}  // namespace loco::run
