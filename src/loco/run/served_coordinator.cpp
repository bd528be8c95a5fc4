#include "loco/run/served_coordinator.h"

#include <fmt/format.h>

#include <cstdio>

#include "loco/membership/authentication.h"
#include "loco/util/host_port.h"

namespace loco::run {

ServedCoordinator::ServedCoordinator(membership::ServerOptions options, int store_port)
    : store_(store_port), options_(with_store(std::move(options), store_.port())), server_(options_) {}

membership::ServerOptions ServedCoordinator::with_store(membership::ServerOptions options, int store_port) {
  options.store_port = store_port;
  options.coordinator.incarnation = membership::new_incarnation();
  return options;
}

bool ServedCoordinator::show_dashboard_link(const std::string& host, const std::string& who) const {
  FILE* terminal = std::fopen("/dev/tty", "w");
  if (terminal == nullptr) return false;
  fmt::print(terminal, "{}: dashboard (members, metrics, events) at http://{}/?token={} (this terminal only)\n", who,
             reachable_host_port(host, port()), membership::status_token(options_.secret, options_.coordinator.run_id));
  std::fclose(terminal);
  return true;
}

}  // namespace loco::run
