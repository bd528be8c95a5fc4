#include "loco/run/served_coordinator.h"

namespace loco::run {

ServedCoordinator::ServedCoordinator(membership::ServerOptions options, int store_port)
    : store_(store_port), options_(with_store(std::move(options), store_.port())), server_(options_) {}

membership::ServerOptions ServedCoordinator::with_store(membership::ServerOptions options, int store_port) {
  options.store_port = store_port;
  options.coordinator.incarnation = membership::new_incarnation();
  return options;
}

}  // namespace loco::run
